#!/usr/bin/env bash
# A/B on the GPU machine: this tree ("new") alternating with another one ("old") in .device/old, each
# round both, in one process per run, so that a change is judged against its own code on the same
# warm machine (a single run's figures there spread -20/+50%).
#
#   bash test/device/ab.sh RUNTIME parts PART [ROUNDS]    bench/parts.ts --part=PART (SAMPLES=9)
#   bash test/device/ab.sh RUNTIME bench FILTER [ROUNDS]  bench/main.ts --filter=FILTER, default set
#
# Before the call, here: fill .device/old with the code to compare against, e.g.
#   rm -rf .device/old && mkdir -p .device/old && git archive HEAD | tar -x -C .device/old
# and carry .device/carry/RUNTIME, .device/carry/bench (the C baseline) and .device/old (run's
# `carry`); test/device/run.sh's set-up runs first (MEMLIFE_DEVICE_SETUP_ONLY). Rounds default to 2.
# MEMLIFE_OPENCL_PLATFORM picks another platform than NVIDIA (Portable: PoCL, to try the script here).
set -uo pipefail
cd "$(dirname "$0")/../.."
rt=${1:-} what=${2:-} arg=${3:-} n=${4:-2}
case $rt in bun | deno | node) ;; *) echo "usage: bash test/device/ab.sh bun|deno|node parts|bench ARG [ROUNDS]" >&2; exit 2 ;; esac
case $what in parts | bench) ;; *) echo "test/device/ab.sh: parts or bench, not '$what'" >&2; exit 2 ;; esac
[ -d .device/old/src ] || { echo "test/device/ab.sh: .device/old holds no tree to compare against" >&2; exit 2; }
MEMLIFE_DEVICE_SETUP_ONLY=1 MEMLIFE_DEVICE_PASSES="none" bash test/device/run.sh "$rt" > /tmp/ab-setup.txt 2>&1 || { tail -20 /tmp/ab-setup.txt; exit 1; }
unset OCL_ICD_FILENAMES
export OPENCL_LIBRARY=/lib/x86_64-linux-gnu/libOpenCL.so.1 OCL_ICD_VENDORS=/tmp/memlife-device/vendors \
  MEMLIFE_OPENCL_PLATFORM=${MEMLIFE_OPENCL_PLATFORM:-NVIDIA} DENO_DIR=/tmp/memlife-device/deno-dir DENO_NO_UPDATE_CHECK=1 NO_COLOR=1
root=$PWD
ln -sfn "$root/node_modules" .device/old/node_modules
for tree in "$root" "$root/.device/old"; do
  [ -x "$tree/bench/baseline" ] || cp .device/carry/bench/baseline "$tree/bench/baseline" 2>/dev/null || true
done
# The runtime's command line for one script of the tree in the current directory.
runtime() {
  case $rt in
    deno) "$root/node_modules/@deno/linux-x64-glibc/deno" run -A --config deno.json --v8-flags=--expose-gc "$@" ;;
    node) "$root/node_modules/.bin/node" --expose-gc "$@" ;;
    bun) "$root/node_modules/.bin/bun" "$@" ;;
  esac
}
echo "cpus: $(nproc)"
for i in $(seq "$n"); do
  for tree in "$root" "$root/.device/old"; do
    echo "== $([ "$tree" = "$root" ] && echo new || echo old) $rt $what $arg round $i"
    (
      cd "$tree" || exit 1
      if [ "$what" = parts ]; then
        runtime bench/parts.ts --part="$arg" --samples="${SAMPLES:-9}" 2>&1 | grep -v "^$"
      else
        runtime bench/main.ts --runtime="$rt" --filter="$arg" --no-install 2>&1 | grep -v "^$" | grep -v "^\[" 
      fi
    )
  done
done
