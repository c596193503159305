"""PyOpenCL's figures for memlife's benchmarks: what a user might pick instead.

Run by bench/main.ts with the Python that has `pyopencl` (Debian: python3-pyopencl). Same method,
options, case names and JSON lines as bench/cases.ts (see bench/measure.ts). PyOpenCL has no
destructor callbacks and no SVM-free callback, so those cases say "unavailable" (the pipeline case
runs without its destructor callback).
"""
import json
import math
import os
import sys
import time

opts = {"--sample-ms": "50", "--warmup-ms": "100", "--samples": "5", "--filter": ""}
for arg in sys.argv[1:]:
    key, _, value = arg.partition("=")
    opts[key] = value
SAMPLE_NS = float(opts["--sample-ms"]) * 1e6
WARMUP_NS = float(opts["--warmup-ms"]) * 1e6
SAMPLES = int(opts["--samples"])
FILTER = opts["--filter"].lower()
SVM_BATCH = 256  # queue.finish() after this many frees, like bench/cases.ts and bench/baseline.c

CASES = [
    "buffer 64 B", "buffer 4 KiB", "buffer 1 MiB", "buffer 16 MiB",
    "buffer 4 KiB +1 destructor", "buffer 4 KiB +4 destructors", "buffer 4 KiB await destroyed",
    "buffer 4 KiB hostPtr use",
    "svm 4 KiB enqueueSVMFree", "svm 4 KiB enqueueSVMFree+onFree", "svm 4 KiB release",
    "pipeline 4 KiB",
]
# pipelineKernel of bench/plan.ts, verbatim.
PIPELINE_KERNEL = ("__kernel void pipeline(__global const int *in, __global int *out, int k) "
                   "{ size_t i = get_global_id(0); out[i] = in[i] * k + 1; }")


def emit(line):
    print(json.dumps(line), flush=True)


def unavailable(name, reason):
    emit({"type": "unavailable", "case": name, "runtime": "python", "impl": "PyOpenCL", "reason": reason})


def quantile(s, q):
    pos = (len(s) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def measure(name, body):
    """body(n) performs n operations. Warm up while calibrating n to one sample's length, then sample."""
    body(0)  # set-up a body may need (a kernel build), outside the timing
    n, spent = 1, 0.0
    while True:
        start = time.perf_counter_ns()
        body(n)
        elapsed = time.perf_counter_ns() - start
        spent += elapsed
        if elapsed >= SAMPLE_NS and spent >= WARMUP_NS:
            break
        if elapsed < SAMPLE_NS:
            per = elapsed / n
            nxt = math.ceil(SAMPLE_NS / per * 1.1) if per > 0 else n * 2
            n = max(n, min(n * 10, nxt))
    per_op = []
    for _ in range(SAMPLES):
        start = time.perf_counter_ns()
        body(n)
        per_op.append((time.perf_counter_ns() - start) / n)
    s = sorted(per_op)
    emit({"type": "result", "case": name, "runtime": "python", "impl": "PyOpenCL", "iterations": n, "items": 1,
          "median": quantile(s, 0.5), "min": s[0], "max": s[-1], "q1": quantile(s, 0.25), "q3": quantile(s, 0.75),
          "samples": [round(x, 3) for x in per_op]})


def pick(items, selector):
    """memlife's selector rule: an index, or a case-insensitive substring of the name."""
    if selector.isdigit():
        return [items[int(selector)]] if int(selector) < len(items) else []
    return [i for i in items if selector.lower() in i.name.lower()][:1]


def main():
    wanted = [c for c in CASES if FILTER in c.lower()]
    if not wanted:
        return
    try:
        import numpy as np
        import pyopencl as cl
    except ImportError as error:
        for name in wanted:
            unavailable(name, f"pyopencl is not installed ({error})")
        return
    platforms = cl.get_platforms()
    psel, dsel = os.environ.get("MEMLIFE_OPENCL_PLATFORM"), os.environ.get("MEMLIFE_OPENCL_DEVICE")
    if psel:
        platforms = pick(platforms, psel)
    devices = [d for p in platforms for d in p.get_devices()]
    if dsel:
        devices = pick(devices, dsel)
    if not devices:
        for name in wanted:
            unavailable(name, "no OpenCL device selected")
        return
    device = devices[0]
    ctx = cl.Context([device])
    queue = cl.CommandQueue(ctx, device)
    emit({"type": "info", "runtime": "python", "version": f"pyopencl {cl.VERSION_TEXT}, Python {sys.version.split()[0]}",
          "device": device.name})
    mf = cl.mem_flags
    host = np.zeros(4096, dtype=np.uint8)
    has_svm = bool(getattr(device, "svm_capabilities", 0)) and hasattr(cl, "SVMAllocation")

    def create(size):
        def body(n):
            for _ in range(n):
                cl.Buffer(ctx, mf.READ_WRITE, size).release()
        return body

    def host_ptr_use(n):
        for _ in range(n):
            cl.Buffer(ctx, mf.READ_WRITE | mf.USE_HOST_PTR, hostbuf=host).release()

    def svm_enqueue(n):
        for i in range(n):
            cl.SVMAllocation(ctx, 4096, 0, cl.svm_mem_flags.READ_WRITE).enqueue_release(queue)
            if (i + 1) % SVM_BATCH == 0:
                queue.finish()
        queue.finish()

    def svm_release(n):
        for _ in range(n):
            cl.SVMAllocation(ctx, 4096, 0, cl.svm_mem_flags.READ_WRITE).release()

    pipeline_state = {}

    def pipeline(n):
        """bench/plan.ts's pipeline case, minus the destructor callback PyOpenCL does not have."""
        if not pipeline_state:
            # Set-up, outside every timing: building the kernel (measure() calls body(0) first).
            kernel = cl.Program(ctx, PIPELINE_KERNEL).build().pipeline
            pipeline_state.update(kernel=kernel, host_in=np.arange(1024, dtype=np.int32),
                                  host_out=np.zeros(1024, dtype=np.int32), k=np.int32(3))
            if n == 0:
                return
        kernel, host_in, host_out, k = (pipeline_state[key] for key in ("kernel", "host_in", "host_out", "k"))
        for _ in range(n):
            buf = cl.Buffer(ctx, mf.READ_WRITE, 4096)
            svm = cl.SVMAllocation(ctx, 4096, 0, cl.svm_mem_flags.READ_WRITE)
            cl.enqueue_copy(queue, buf, host_in, is_blocking=False)
            kernel.set_arg(0, buf)
            kernel.set_arg(1, svm)
            kernel.set_arg(2, k)
            cl.enqueue_nd_range_kernel(queue, kernel, (1024,), None)
            cl.enqueue_copy(queue, host_out, svm, is_blocking=False).wait()
            svm.enqueue_release(queue)
            buf.release()
        queue.finish()
        if n > 0 and host_out[1023] != 1023 * 3 + 1:
            raise RuntimeError("the PyOpenCL pipeline computed a wrong result")

    bodies = {
        "buffer 64 B": create(64), "buffer 4 KiB": create(4096), "buffer 1 MiB": create(1 << 20),
        "buffer 16 MiB": create(16 << 20), "buffer 4 KiB hostPtr use": host_ptr_use,
        "svm 4 KiB enqueueSVMFree": svm_enqueue, "svm 4 KiB release": svm_release,
        "pipeline 4 KiB": pipeline,
    }
    for name in wanted:
        body = bodies.get(name)
        if body is None:
            what = "SVM-free callbacks" if name.startswith("svm") else "destructor callbacks"
            unavailable(name, f"PyOpenCL has no {what}")
        elif (name.startswith("svm") or name.startswith("pipeline")) and not has_svm:
            unavailable(name, f'device "{device.name}" has no SVM')
        else:
            try:
                measure(name, body)
            except Exception as error:  # a driver error in one case should not hide the others
                unavailable(name, f"error: {error}")


main()
