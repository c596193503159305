#!/usr/bin/env bash
# One fixture, in one runtime, on the GPU machine, with diagnostics when it does not exit in time:
#
#   run tool: carry [".device/carry/RUNTIME"] (+ ".device/carry/embree4" for Embree fixtures),
#             command "bash test/device/one.sh RUNTIME test/fixtures/NAME.ts [ARGS...]", timeout_s <= 300
#
# The set-up (runtime, Embree, ICD vendors) is run.sh's own: it is sourced with
# MEMLIFE_DEVICE_SETUP_ONLY=1. MEMLIFE_OPENCL_PLATFORM defaults to NVIDIA; MEMLIFE_ONE_TIMEOUT
# (default 25 s) is how long the fixture may run. On Node the fixture runs with
# test/device/diag.ts preloaded (active resources, owed callbacks, async calls not returned, from
# MEMLIFE_DIAG_AFTER_MS on). A fixture still running at the limit gets its native threads shown
# (name, kernel wait channel, syscall; `gdb` backtraces where gdb exists), then SIGKILL.
# MEMLIFE_ONE_REPEAT=N runs it N times (stops at the first that hangs or fails).
set -uo pipefail
rt=${1:-}
fixture=${2:-}
[ -n "$rt" ] && [ -n "$fixture" ] || { echo "usage: bash test/device/one.sh bun|deno|node FIXTURE [ARGS...]" >&2; exit 2; }
shift 2
export MEMLIFE_OPENCL_PLATFORM=${MEMLIFE_OPENCL_PLATFORM:-NVIDIA}
limit=${MEMLIFE_ONE_TIMEOUT:-25}
repeat=${MEMLIFE_ONE_REPEAT:-1}
# Its output, less the ldconfig listing, through a process substitution: a pipe would source it in a subshell.
MEMLIFE_DEVICE_SETUP_ONLY=1 source "$(dirname "$0")/run.sh" "$rt" > >(grep -vE '^  (lib|have )') 2>&1
sleep 0.2
case $rt in
node) cmd=("$link" --import ./test/device/diag.ts "$fixture" "$@") ;;
*) cmd=("${run_rt[@]}" "$fixture" "$@") ;;
esac

threads() { # PID
  local pid=$1 t
  echo "-- threads of $pid (tid name wchan syscall)"
  for t in /proc/"$pid"/task/*; do
    printf '  %s %-16s %-24s %s\n' "${t##*/}" "$(cat "$t/comm" 2>/dev/null)" "$(cat "$t/wchan" 2>/dev/null)" "$(cut -d' ' -f1-3 "$t/syscall" 2>/dev/null)"
  done
  if command -v gdb >/dev/null; then
    echo "-- gdb backtraces"
    timeout 60 gdb -p "$pid" -batch -nx -ex 'set pagination off' -ex 'thread apply all bt 18' 2>&1 |
      grep -E '^(Thread|#)' | cut -c1-220 | head -400
  else
    echo "-- no gdb here: stacks scanned by test/device/stack.py (TIDs in MEMLIFE_ONE_TIDS, default all but V8's own)"
    local py; py=$(command -v python3 || ls /opt/*/.venv/bin/python3 2>/dev/null | head -1)
    [ -n "$py" ] && timeout 60 "$py" test/device/stack.py "$pid" ${MEMLIFE_ONE_TIDS:-$(for t in /proc/"$pid"/task/*; do case $(cat "$t/comm") in V8Worker|DelayedTaskSche|SignalInspector) ;; *) echo "${t##*/}" ;; esac; done)} 2>&1 | cut -c1-200
  fi
}

for ((i = 1; i <= repeat; i++)); do
  echo "== run $i: MEMLIFE_OPENCL_PLATFORM=$MEMLIFE_OPENCL_PLATFORM ${cmd[*]} (limit ${limit} s)"
  start=$SECONDS
  "${cmd[@]}" &
  pid=$!
  while kill -0 "$pid" 2>/dev/null && [ $((SECONDS - start)) -lt "$limit" ]; do sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "== run $i: still running after ${limit} s"
    threads "$pid"
    kill -KILL "$pid"
    wait "$pid" 2>/dev/null
    exit 124
  fi
  wait "$pid"
  rc=$?
  echo "== run $i: exit $rc after $((SECONDS - start)) s"
  [ $rc -eq 0 ] || exit $rc
done
