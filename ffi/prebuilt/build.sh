#!/usr/bin/env bash
# Builds libmemlife-ledger (memlife-ledger.c, which includes ../ledger.c, ../event-relay.c with ../deferred.c, and ../lane.c) for
# Deno and Node into ffi/prebuilt/<os>-<arch>/, where ffi/native-ledger.ts looks for it. The libraries are committed
# and shipped in the npm package: nothing is compiled on a user's machine. Run it after changing
# either C file (test/ledger.spec.ts fails while a committed library is stale):
#   bash ffi/prebuilt/build.sh
# linux-x64 with the system's cc; linux-arm64 with aarch64-linux-gnu-gcc where it is installed
# (Debian: apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross). OUT=dir builds elsewhere.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here}
hash=$(cat "$here/../ledger.c" "$here/../event-relay.c" "$here/../deferred.c" "$here/../lane.c" "$here/memlife-ledger.c" | sha256sum | cut -c1-16)

build() {
  local cc=$1 target=$2
  mkdir -p "$out/$target"
  # No libc beyond what every glibc has; -s strips; the build id is left out so that the same
  # sources and compiler give the same bytes.
  "$cc" -std=c11 -D_GNU_SOURCE -O2 -fPIC -shared -pthread -Wall -Wextra -Werror \
    -DLEDGER_SOURCE_HASH="\"$hash\"" -Wl,-s -Wl,--build-id=none \
    -o "$out/$target/libmemlife-ledger.so" "$here/memlife-ledger.c" -ldl
  echo "build.sh: $target/libmemlife-ledger.so ($hash)"
}

build "${CC:-cc}" linux-x64
if command -v aarch64-linux-gnu-gcc >/dev/null; then
  build aarch64-linux-gnu-gcc linux-arm64
else
  echo "build.sh: no aarch64-linux-gnu-gcc: linux-arm64 left as it is" >&2
fi
