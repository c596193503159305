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
 * the functions the runtime had when this module loaded: fakes installed before that (Jest's
 * `fakeTimers: { enableGlobally: true }`) are what it finds then, so there memlife's timers are
 * the fakes (its microtasks are not).
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
export const ownSetTimeout: typeof setTimeout = globalThis.setTimeout;
export const ownSetInterval: typeof setInterval = globalThis.setInterval;
export const ownClearInterval: typeof clearInterval = globalThis.clearInterval;
export const ownSetImmediate: typeof setImmediate = globalThis.setImmediate;
