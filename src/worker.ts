/**
 * What memlife refuses in a Worker, and why. A Worker's memlife has its own callback trampolines,
 * made in the Worker's isolate; native threads that still owe a callback (a PoCL worker completing
 * a command, a TBB worker asking the memory monitor, Bun's thread pool reporting an async call)
 * call them after `terminate()`, when that isolate is gone. Measured on this project's machine
 * (test/fixtures/worker-host.ts, a Worker terminated with callbacks owed): Deno crashes (SIGSEGV
 * or abort: its closed UnsafeCallbacks), Node hangs in `terminate()` (koffi blocks the driver
 * thread on the dead Worker while a libuv thread waits on it), and Bun crashes for a threadsafe
 * JSCallback called after the terminate (its async calls no longer use one in a Worker: they are
 * polled, see ffi/bun.ts). No runtime tells a Worker's code that it is being terminated, so
 * memlife refuses, with a WorkerError, each feature that lets native threads call into a Worker:
 * - OpenCL, everywhere: every command's completion, destructor and SVM-free callbacks come from
 *   driver threads.
 * - Embree's memory monitor, budget and accounting on Bun and Deno (TBB workers call the monitor);
 *   a device without them commits on a runtime thread (a Deno Worker's on its own: see
 *   `commitOnWorkerThread`) and calls back only on an error. On Node a
 *   Worker terminated during a commit with a JS monitor exited cleanly in 13 runs of 13: allowed.
 * A program that never terminates such a Worker while callbacks are owed (it lets the Worker end on
 * its own, as a test runner's worker pool does) says so with MEMLIFE_ALLOW_WORKERS=1, and gets
 * everything, as on the main thread.
 */
import { envVar, inWorker, runtime } from "./backend.ts";
import { WorkerError } from "./errors.ts";

const WHY = {
  bun: "Bun crashes when a native thread calls a callback of a terminated Worker",
  deno: "Deno crashes when a native thread calls a callback of a terminated Worker",
  node: "Node hangs in worker.terminate() while a native thread waits on a callback of that Worker",
} as const;

/** Throws a WorkerError for `feature` in a Worker on the runtimes listed (default: all). */
export function refuseInWorker(feature: string, runtimes: readonly (typeof runtime)[] = ["bun", "deno", "node"]): void {
  if (inWorker && runtimes.includes(runtime) && envVar("MEMLIFE_ALLOW_WORKERS") !== "1") {
    throw new WorkerError(feature, runtime, WHY[runtime]);
  }
}

/**
 * Whether a Worker's device without accounting commits on the Worker's own thread (blocking it
 * for the build) rather than off it. Embree calls the error function on the thread of the call that
 * failed; from a commit's thread Deno's thread-safe callback of a Worker terminated meanwhile
 * crashed the process (SIGSEGV in 5 runs of 6, test/stress/worker-embree-error/), while on the
 * Worker's own thread it is called inside the call. Without accounting no TBB worker asks that
 * thread anything during the build (the monitor is what it would ask), so nothing can deadlock.
 * Bun keeps such a call in C for the Worker to take (ffi/bun-relay.c, MODE_KEPT); Node never crashed.
 */
export const commitOnWorkerThread: boolean = inWorker && runtime === "deno";
