/**
 * The runtime's own microtask and timer functions, whatever the program fakes later. A program's
 * fake timers (Jest's modern fake timers, vitest's `vi.useFakeTimers`, Sinon's) replace the global
 * `queueMicrotask`, `setTimeout`, `setInterval` and `setImmediate` with functions that run nothing
 * until the program advances its clock; memlife's own scheduling must not wait on that. With
 * `queueMicrotask` faked, a destructor callback's `buf.destroyed` and an SVM free's `event.wait()`
 * never settled, and a test that awaited them timed out (test/fake-timers.spec.ts).
 *
 * `microtask` queues a reaction of a promise settled here: a microtask no timer fake replaces,
 * through Promise.prototype's own `then`, taken now (a program may patch it later). The others are
 * the functions the runtime had when this module loaded, or those a backend gives (`useTimers`):
 * fakes installed before that (Jest's `fakeTimers: { enableGlobally: true }`) are what the globals
 * are then.
 */
const settled: Promise<void> = Promise.resolve();
const then: (this: Promise<void>, onFulfilled: () => void) => Promise<unknown> = Promise.prototype.then;

/**
 * Runs `fn` on a microtask, as `queueMicrotask` does, except that an exception it throws surfaces
 * as an unhandled rejection, not an uncaught exception. Throws RangeError at the edge of the stack.
 */
export function microtask(fn: () => void): void {
  then.call(settled, fn);
}

/** `queueMicrotask` as memlife loaded: for a rethrow that must surface as an uncaught exception. */
export const ownQueueMicrotask: typeof queueMicrotask = globalThis.queueMicrotask;
export let ownSetTimeout: typeof setTimeout = globalThis.setTimeout;
export let ownSetInterval: typeof setInterval = globalThis.setInterval;
export let ownClearInterval: typeof clearInterval = globalThis.clearInterval;
export let ownSetImmediate: typeof setImmediate = globalThis.setImmediate;

/** The timer functions a backend gives `useTimers`. */
export interface Timers {
  setTimeout: typeof setTimeout;
  setInterval: typeof setInterval;
  clearInterval: typeof clearInterval;
  setImmediate: typeof setImmediate;
}

/**
 * A backend's timers in place of the globals, called as it loads, before the core uses any. Node's
 * backend gives `node:timers`, which fakes on the global object never replace, not even those
 * installed before memlife loaded (Jest's `fakeTimers: { enableGlobally: true }`): with the faked
 * globals, memlife's hold on the event loop ran nothing, and Node ended the program, exit code 0,
 * before an owed onFree or destructor callback came (test/fixtures/fake-timers-before.ts). Bun's
 * `node:timers` reads the globals when called, and Deno's keeps the loop open by itself.
 */
export function useTimers(timers: Timers): void {
  ownSetTimeout = timers.setTimeout;
  ownSetInterval = timers.setInterval;
  ownClearInterval = timers.clearInterval;
  ownSetImmediate = timers.setImmediate;
}

/**
 * `timer.ref()` (hold) or `timer.unref()`, for a node:timers Timeout (Node's, Deno's), with the stack
 * probed first. Both runtimes' Timeout.ref() marks the timer held before the call that counts it in
 * the loop (incRefCount), and when that call overflowed the stack the mark stayed without the count,
 * for good: memlife's keep-alive timer then held nothing while callbacks were owed, and the process
 * left with a finish() unsettled (test/fixtures/stack-limit.ts "finish"). The probe throws
 * RangeError before the timer is touched.
 */
export function holdWith(timer: unknown, hold: boolean): void {
  stackProbe(TIMER_PROBE);
  if (hold) (timer as { ref(): void }).ref();
  else (timer as { unref(): void }).unref();
}

/** Frames probed before a timer's ref() or unref() (see `holdWith`). */
const TIMER_PROBE = 8;

function stackProbe(n: number): number {
  // Not a loop: each frame must take stack. The sum keeps the calls from being folded away.
  return n === 0 ? 0 : stackProbe(n - 1) + 1;
}
