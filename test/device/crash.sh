#!/usr/bin/env bash
# A command that crashes now and then, run under gdb on the GPU machine (which has no gdb of its
# own) until it crashes, with the crashing thread's and every thread's backtrace:
#
#   run tool: carry [".device/carry/RUNTIME", ".device/carry/gdb.tar.xz", (".device/carry/embree4")],
#             command "bash test/device/crash.sh RUNTIME ARGS...", timeout_s <= 600
#
# ARGS are the runtime's arguments (for Deno: test -A --no-check --parallel DIR, say). The runtime,
# Embree and the ICD vendors are set up by run.sh (sourced with MEMLIFE_DEVICE_SETUP_ONLY=1).
# .device/carry/gdb.tar.xz (16 MiB) is Debian 12's gdb with what it needs, in gdbb/: gdb; lib/, the
# libraries `ldd /usr/bin/gdb` names but glibc's, libstdc++ and libgcc_s (libicudata.so.72 replaced by
# a stub that defines only `const char icudt72_dat[64]`: 30 MiB gdb never reads); py/lib/python3.11,
# /usr/lib/python3.11 less config-*, dist-packages, test, idlelib, tkinter, lib2to3, ensurepip,
# pydoc_data and __pycache__; data/, /usr/share/gdb. `tar -C /tmp -cf - gdbb | xz -9`. gdb itself
# runs with LD_LIBRARY_PATH and PYTHONHOME of its own; the program under it gets the environment
# run.sh made. MEMLIFE_CRASH_RUNS (default 8) runs at most, stopping after MEMLIFE_CRASH_KEEP crashes
# (default 1); each crash's output goes to $OUT/crash-N.txt.
set -uo pipefail
rt=${1:-}
[ -n "$rt" ] || { echo "usage: bash test/device/crash.sh bun|deno|node ARGS..." >&2; exit 2; }
shift
export MEMLIFE_OPENCL_PLATFORM=${MEMLIFE_OPENCL_PLATFORM:-NVIDIA}
runs=${MEMLIFE_CRASH_RUNS:-8}
keep=${MEMLIFE_CRASH_KEEP:-1}
crashes=0
out=${OUT:-/tmp/memlife-crash-out}
mkdir -p "$out"
MEMLIFE_DEVICE_SETUP_ONLY=1 source "$(dirname "$0")/run.sh" "$rt" > >(grep -vE '^  (lib|have )') 2>&1
sleep 0.2
mkdir -p /tmp/memlife-gdb && tar -C /tmp/memlife-gdb -xJf .device/carry/gdb.tar.xz 2>/dev/null ||
  { python3 -c 'import lzma,sys; sys.stdout.buffer.write(lzma.open(".device/carry/gdb.tar.xz").read())' | tar -C /tmp/memlife-gdb -xf -; }
g=/tmp/memlife-gdb/gdbb
# The program's environment, kept from gdb's own LD_LIBRARY_PATH: gdb starts it through a shell
# that gets gdb's environment, so the program's LD_LIBRARY_PATH is set again inside.
prog_ld=${LD_LIBRARY_PATH:-}
gdbrun() {
  LD_LIBRARY_PATH=$g/lib PYTHONHOME=$g/py "$g/gdb" --data-directory="$g/data" -batch -nx \
    -ex 'set pagination off' -ex 'set print thread-events off' -ex 'set confirm off' \
    -ex 'set startup-with-shell off' -iex 'set libthread-db-search-path /nonexistent' \
    -ex "set environment LD_LIBRARY_PATH=$prog_ld" -ex 'unset environment PYTHONHOME' \
    -ex 'handle all nostop noprint pass' \
    -ex 'handle SIGSEGV SIGBUS SIGABRT SIGILL SIGFPE stop print nopass' \
    -ex run \
    -ex 'echo \n== the crashing thread\n' -ex 'info registers' -ex 'p $_siginfo._sifields._sigfault.si_addr' -ex 'x/6i $pc' -ex 'bt 40' \
    -ex 'echo \n== shared libraries\n' -ex 'info sharedlibrary' \
    -ex 'echo \n== every thread\n' -ex 'info threads' -ex 'thread apply all bt 24' \
    -ex kill --args "$link" "$@"
}
for ((i = 1; i <= runs; i++)); do
  echo "== run $i: ${link} $*"
  start=$SECONDS
  gdbrun "$@" > "$out/crash-$i.txt" 2>&1
  if grep -q 'received signal SIG' "$out/crash-$i.txt"; then
    echo "== run $i: a signal after $((SECONDS - start)) s; $out/crash-$i.txt"
    grep -A45 '== the crashing thread' "$out/crash-$i.txt" | grep -vE '^(r[0-9]|[cdefg]s|k[0-7]|fs_base|gs_base) ' | cut -c1-240
    crashes=$((crashes + 1))
    [ "$crashes" -lt "$keep" ] || exit 0
    continue
  fi
  if grep -q 'exited normally' "$out/crash-$i.txt"; then
    echo "== run $i: exit 0 after $((SECONDS - start)) s: $(grep -E 'passed|failed' "$out/crash-$i.txt" | tail -1)"
    rm -f "$out/crash-$i.txt"
  else
    echo "== run $i: no signal, no normal exit after $((SECONDS - start)) s: $out/crash-$i.txt ends"
    tail -25 "$out/crash-$i.txt" | cut -c1-240
  fi
done
echo "== $crashes crashes in $runs runs"
