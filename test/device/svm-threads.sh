#!/usr/bin/env bash
# test/device/svm-threads.c on the GPU machine (its cc was not relied on): carry
# .device/carry/probe/svm-threads, built here with
#   cc -O2 -pthread -o .device/carry/probe/svm-threads test/device/svm-threads.c -lOpenCL
# and, with .device/carry/deno for run.sh's set-up, run "bash test/device/svm-threads.sh [REPEAT]": every MODE with and without the lock, 1, 4 and
# 16 threads, REPEAT times each (default 3), each under `timeout`; a crash shows as its exit status.
# MEMLIFE_SVM_THREADS and MEMLIFE_SVM_MODES pick (default "1 4 16" and "0 1 2"); MEMLIFE_SVM_RUN_S
# (default 30) is each run's limit. The distribution's ICD loader (run.sh's OPENCL_LIBRARY) comes first: CUDA's, which ldconfig finds
# first there, reads OCL_ICD_FILENAMES only, and run.sh unsets that.
set -uo pipefail
cd "$(dirname "$0")/../.."
repeat=${1:-3}
MEMLIFE_DEVICE_SETUP_ONLY=1 source test/device/run.sh deno > /dev/null 2>&1  # the ICD vendors (NVIDIA, PoCL); any runtime will do
bin=.device/carry/probe/svm-threads
echo "OCL_ICD_VENDORS=${OCL_ICD_VENDORS:-} ($(ls "${OCL_ICD_VENDORS:-/nonexistent}" 2>&1 | tr "\n" " "))"
for threads in ${MEMLIFE_SVM_THREADS:-1 4 16}; do
  for mode in ${MEMLIFE_SVM_MODES:-0 1 2}; do
    for lock in 0 1; do
      for ((i = 1; i <= repeat; i++)); do
        out=$(LD_LIBRARY_PATH=$(dirname "$OPENCL_LIBRARY"):${LD_LIBRARY_PATH:-} timeout -k 5 "${MEMLIFE_SVM_RUN_S:-30}" "$bin" "$mode" "$lock" "$threads" 10 2>&1)
        rc=$?
        echo "threads $threads mode $mode lock $lock run $i: exit $rc: $(echo "$out" | tail -1)"
        [ $rc -eq 0 ] || echo "$out" | head -5
      done
    done
  done
done
