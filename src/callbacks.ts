/**
 * What every native callback shares: integer ids for `user_data`, user code deferred to the JS
 * thread's next microtask (never inside the native call that triggered it), one way to surface
 * exceptions, and keeping the event loop alive while a callback is still owed.
 */
import { backend } from "./backend.ts";
import { show } from "./check.ts";
import { microtask, ownClearInterval, ownQueueMicrotask, ownSetInterval, ownSetTimeout } from "../ffi/own-timers.ts";

/**
 * Integer ids for native `user_data`: a native trampoline receives the id and finds its entry here.
 * Ids start at 1 (0 would read as NULL) and are reused once an entry leaves.
 */
export class IdTable<T> {
  #entries: (T | undefined)[] = [undefined];
  #free: number[] = [];
  add(entry: T): number {
    const id = this.#free.pop();
    if (id !== undefined) {
      this.#entries[id] = entry;
      return id;
    }
    this.#entries.push(entry);
    return this.#entries.length - 1;
  }
  get(id: number): T | undefined {
    return this.#entries[id];
  }
  /** The native side will not call with this id again. */
  delete(id: number): T | undefined {
    const entries = this.#entries;
    const free = this.#free;
    const entry = entries[id];
    if (entry !== undefined) {
      // The id freed first: at the edge of the stack `push` may throw, and an entry cleared with
      // its id never freed made `size` count it for ever (an Embree device state gone, counted live).
      free.push(id);
      entries[id] = undefined;
    }
    return entry;
  }
  get size(): number {
    return this.#entries.length - 1 - this.#free.length;
  }
  /** Each entry with its id, in id order; `fn` may delete the one it is given. */
  forEach(fn: (entry: T, id: number) => void): void {
    const entries = this.#entries;
    for (let id = 1; id < entries.length; id++) {
      const entry = entries[id];
      if (entry !== undefined) fn(entry, id);
    }
  }
}

// --- deferral ------------------------------------------------------------------------------------

type Task<T> = (arg: T) => void;
/**
 * Task, argument, task, argument, ...: no closure per deferred call. Two arrays, never shrunk: the
 * one filled now (`queued` entries) and the one the last drain emptied. A callback from a driver
 * thread (NVIDIA) comes alone, with a drain of its own, and a new array per drain cost it JS
 * (bench/js-cost.ts "destructor memlife, one per turn", Deno: 361-404 -> 290-312 ns a buffer) that a
 * driver thread, waiting for the JS thread, pays about twice (bench/parts.ts --part=destructor).
 */
let queue: unknown[] = [];
let queued = 0;
let spare: unknown[] = [];
let scheduled = false;

function drain(): void {
  scheduled = false;
  const tasks = queue;
  const n = queued;
  queue = spare;
  queued = 0;
  let i = 0;
  try {
    for (; i < n; i += 2) {
      const task = tasks[i] as Task<unknown>;
      const arg = tasks[i + 1];
      // Cleared as taken: an emptied array holds nothing (its arguments are entries and buffers).
      tasks[i] = tasks[i + 1] = undefined;
      task(arg);
    }
  } finally {
    if (i + 2 < n) {
      // A task that threw (memlife's tasks catch the program's exceptions; this is the stack
      // running out) surfaces as an unhandled rejection (see `microtask`): the tasks after it
      // still run, on a microtask of their own, ahead of those deferred since.
      const left = tasks.slice(i + 2, n).concat(queue.slice(0, queued));
      queue = left;
      queued = left.length;
      spare = [];
      schedule();
    } else spare = n <= SPARE_MAX ? tasks : [];
  }
}

/** A larger queue (a burst of callbacks from one release) is not kept: its memory goes back. */
const SPARE_MAX = 2048;

function schedule(): void {
  // Marked scheduled only once `microtask` returned: at the edge of the stack it throws RangeError, and
  // a mark left behind would keep every later callback from ever running.
  if (!scheduled) {
    // Not queueMicrotask: a program's fake timers replace it (ffi/own-timers.ts).
    microtask(drain);
    scheduled = true;
  }
}

/**
 * Runs `task(arg)` on the JS thread after the current synchronous code, in order with other
 * deferred tasks. PoCL calls destructor callbacks inside clReleaseMemObject, NVIDIA on a driver
 * thread: deferring both to a microtask makes them indistinguishable to the program.
 */
export function defer<T>(task: Task<T>, arg: T): void {
  const at = queued;
  queue[at] = task;
  queue[at + 1] = arg;
  queued = at + 2;
  schedule();
}

// --- exceptions thrown by user callbacks ---------------------------------------------------------

/**
 * Where an exception thrown by a user callback came from; "release" is the failure of a native
 * release that runs off the JS thread after `release()` returned, which no caller can receive.
 */
export type CallbackSource = "destructor" | "svmFree" | "memoryMonitor" | "release";
export type CallbackErrorHandler = (error: unknown, source: CallbackSource) => void;
let errorHandler: CallbackErrorHandler | null = null;

/**
 * Decide where exceptions thrown by your callbacks go (any thrown value, `undefined` included, and
 * the rejection of a promise an `async` callback returned). Each reaches the program once: through
 * the promise the program holds for that operation when there is one (`buf.destroyed` read before
 * the callbacks ran, a pending `event.wait()`), else through this handler, else (the default) it is
 * rethrown on a fresh microtask and surfaces like an exception thrown by a timer callback (Node's
 * `uncaughtException`, Deno's and Bun's `error` event). A handler that throws surfaces the same
 * way, as an AggregateError of [the callback's exception, the handler's]. Source "release" is the
 * failure of a native release that ran off the JS thread after `release()` returned. Pass `null`
 * to restore the default.
 * @example
 * import { onCallbackError } from "memlife";
 * onCallbackError((error, source) => log.warn(`${source} callback failed`, error));
 */
export function onCallbackError(handler: CallbackErrorHandler | null): void {
  if (handler !== null && typeof handler !== "function") {
    throw new TypeError(`onCallbackError takes a function (error, source) => void, or null, got ${typeof handler}`);
  }
  errorHandler = handler;
}

export function reportCallbackError(error: unknown, source: CallbackSource): void {
  if (errorHandler !== null) {
    try {
      errorHandler(error, source);
      return;
    } catch (handlerError) {
      // The handler did not take the exception, and failed itself: the program must learn of both,
      // the callback's first, the way it learns of any exception no one handled. The message names
      // both, for Bun prints only the message of an uncaught AggregateError, not its `errors`.
      error = new AggregateError(
        [error, handlerError],
        `the onCallbackError handler threw ${describe(handlerError)} while handling ${
          describe(error)
        } from source "${source}" (errors: [that exception, the handler's])`,
      );
    }
  }
  const rethrown = printable(error, source);
  ownQueueMicrotask(() => {
    throw rethrown;
  });
}

/**
 * The value itself, unless no runtime can print it: a revoked Proxy, or one whose traps throw, is
 * then replaced by an Error that says so (not as its `cause`: printing the Error prints the cause,
 * which failed the same way). Rethrown as it was, Node printed "could not be printed", and Deno
 * went on and exited 0 with nothing said at all (a hostile pass). Probed only through operations
 * that run no getter of an ordinary object.
 */
function printable(value: unknown, source: CallbackSource): unknown {
  if ((typeof value !== "object" && typeof value !== "function") || value === null) return value;
  try {
    Object.getPrototypeOf(value);
    Reflect.ownKeys(value);
    return value;
  } catch (probe) {
    return new Error(
      `a callback of source "${source}" threw a value that cannot be printed (${describe(probe)})`,
    );
  }
}

/** A thrown value, for a message: never throws itself (a getter, a Proxy, `message` may). */
function describe(value: unknown): string {
  try {
    return value instanceof Error ? `${value.name}: ${value.message}` : show(value);
  } catch {
    return "a value that cannot be shown";
  }
}

/**
 * The promise a user callback returned, if it returned one (an `async` callback): its rejection
 * counts as a throw. Reading `then` may itself throw; the caller treats that as the callback's.
 */
export function returnedPromise(value: unknown): PromiseLike<unknown> | undefined {
  if ((typeof value === "object" && value !== null) || typeof value === "function") {
    const then = (value as { then?: unknown }).then;
    if (typeof then === "function") return value as PromiseLike<unknown>;
  }
  return undefined;
}

/**
 * How the user callbacks tied to one operation ended (e.g. `onFree` of an SVM free), delivered
 * exactly once: to the promises the program holds for that operation (`event.wait()`) when it
 * holds any, else to `onCallbackError`, else as an uncaught exception. A promise asked for after
 * that resolves: the exception has reached the program already.
 */
export class CallbackOutcome {
  readonly #source: CallbackSource;
  #settled = false;
  #holders: { resolve: () => void; reject: (error: unknown) => void }[] | undefined;
  #markDone!: () => void;
  /** Settles (never rejects) once the callbacks are done: for bookkeeping such as `finish()`. */
  readonly done: Promise<void>;

  constructor(source: CallbackSource) {
    this.#source = source;
    let markDone: (() => void) | undefined;
    this.done = new Promise<void>((resolve) => (markDone = resolve));
    this.#markDone = executorRan(markDone, this.done);
  }

  /** Whether the callbacks are done (or will never run). */
  get settled(): boolean {
    return this.#settled;
  }

  /** A promise for the program: rejects with the callbacks' exception unless delivered already. */
  hold(): Promise<void> {
    if (this.#settled) return Promise.resolve();
    return new Promise<void>((resolve, reject) => (this.#holders ??= []).push({ resolve, reject }));
  }

  /** `failed` says whether anything was thrown: `error` may be any value, `undefined` included. */
  settle(failed: boolean, error?: unknown): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#markDone();
    const holders = this.#holders;
    this.#holders = undefined;
    if (!failed) {
      if (holders !== undefined) { for (const h of holders) h.resolve(); }
    } else if (holders !== undefined) {
      for (const h of holders) h.reject(error);
    } else {
      reportCallbackError(error, this.#source);
    }
  }
}

/**
 * `resolve`, the resolving function a promise's executor handed out, checked: at the edge of the
 * stack the executor may not run, and the promise then rejects while `resolve` stays undefined
 * (memlife later called undefined: TypeError). Then this throws RangeError, as the stack running
 * out does, and the promise's rejection is handled. (An executor, not Promise.withResolvers: that
 * costs 15 ns more per promise, on V8 and JSC alike.)
 */
export function executorRan<F>(resolve: F | undefined, promise: Promise<unknown>): F {
  if (resolve === undefined) {
    promise.catch(noop);
    throw new RangeError("Maximum call stack size exceeded (a promise's executor could not run)");
  }
  return resolve;
}

// --- keeping the event loop alive while a native callback is owed --------------------------------

let owed = 0;
/** `owed`, where the backend's native side can read it (Backend.callbacksAwaited). */
const awaited = backend.callbacksAwaited;
/**
 * Made at load, not on first use: at the edge of the stack, setInterval can throw after it made
 * its timer, which then held the event loop for ever with nothing left to unref it (a program
 * that recursed until its stack overflowed never ended).
 */
const keepAlive: ReturnType<typeof setInterval> = ownSetInterval(noop, 1 << 30);
backend.unrefTimer(keepAlive);

/**
 * A native callback is expected (a buffer released whose destructor has not run yet): hold the
 * event loop open, or `await buf.destroyed` at top level would end the program before a driver
 * thread delivers it. The runtime-neutral way to hold the loop is a timer: one for the process,
 * made once and then only ref'd and unref'd. Made and cleared each time, it cost every buffer
 * awaited one at a time on a driver-thread platform 0.1 µs (Bun) to 1.2 µs (Deno); a ref and an
 * unref cost 12-37 ns (bench/js-cost.ts, "delivered later").
 */
export function owe(): void {
  // Counted once the timer holds the loop: at the edge of the stack the timer call may throw, and
  // a count without it would hold nothing, or a count left over would hold the loop for ever.
  if (owed === 0) backend.refTimer(keepAlive);
  awaited[0] = ++owed;
}

export function paid(): void {
  // Uncounted once the timer let go, for the same reason as in owe().
  if (owed === 1) backend.unrefTimer(keepAlive);
  awaited[0] = --owed;
}

/** @internal Native callbacks owed now (what `owe()` counted and `paid()` did not): for diagnostics. */
export function owedCallbacks(): number {
  return owed;
}

function noop(): void {}

// --- the FinalizationRegistry safety net ---------------------------------------------------------

/**
 * The static through which a class gives its safety net what the finalizer needs to release one of
 * its objects (never the object itself), or `undefined` once it owns no native resource any more.
 * Read from the object's private fields, whatever the program wrote on the object: its own answer,
 * never the public `alive`, which a program can shadow (a released event registered with refs 0 had
 * its context disowned twice, and released natively under a live allocation).
 */
export const finalizerState: unique symbol = Symbol("memlife.finalizerState");

/**
 * A FinalizationRegistry, entered late. Registering costs 80–300 ns per object (measured on all
 * three runtimes), as much as creating and releasing a buffer natively, so objects wait in a
 * nursery and only those still alive at the end of the current turn (or when the nursery fills)
 * are registered. Code that creates and releases objects in a loop never pays for the registry.
 *
 * Released objects are not taken out of the nursery: every way of doing so that was measured (a
 * slot for the latest object, popping the array) made Deno and Node slower, up to 1.8x for a
 * buffer with one destructor callback in Deno. The nursery is small instead, so it keeps few
 * dead wrappers reachable: with 256 rather than 4096, Bun's create + release came closer to raw.
 */
const NURSERY_SIZE = 256;

/**
 * `setTimeout`, or `setInterval` with `repeat`, after making sure there is stack for it. Node counts
 * a new timer as holding the event loop in its constructor, before the insertion that throws at
 * the edge of the stack: a timer memlife made inside a call there held a finished program for ever
 * (a hostile pass; a plain program's own timer does the same). The probe throws RangeError first,
 * where the caller expects the timer call's own.
 */
export function timer(fn: () => void, ms: number, repeat = false): unknown {
  // `unknown`, as the backends' refTimer/unrefTimer take it: the .d.ts files must not name the
  // timer types of one runtime's typings (a consumer's TypeScript may have none).
  headroom(STACK_PROBE);
  return repeat ? ownSetInterval(fn, ms) : ownSetTimeout(fn, ms);
}

/**
 * A 50 ms poll for callbacks a driver may never make: PoCL 3.1 calls none for a command that failed
 * because an event it waits on failed (no event callback, no SVM free callback). Each owner keeps
 * the table of what it watches (event.ts waits, queue.ts armed completions, svm.ts frees); `tick`
 * reads their statuses and says whether anything is left. The timer holds the event loop only
 * while the owner says it must (`start(true)`, until `letLoopGo()`).
 */
export class StatusPoll {
  #timer: unknown = undefined;
  #holds = false;
  readonly #tick: () => boolean;
  constructor(tick: () => boolean) {
    this.#tick = tick;
  }
  /** Runs `tick` every 50 ms from now until it answers false; with `holds`, the timer holds the loop. */
  start(holds = false): void {
    const running = this.#timer;
    if (running !== undefined && (this.#holds || !holds)) return;
    // Made before the running one is cleared: at the edge of the stack `timer` may throw, and the
    // poll must not be left marked running on a cleared timer.
    const made = timer(() => this.#run(), POLL_MS, true);
    if (running !== undefined) ownClearInterval(running as ReturnType<typeof setInterval>);
    this.#timer = made;
    this.#holds = holds;
    if (!holds) backend.unrefTimer(made);
  }
  /** Nothing watched needs the event loop held any more. */
  letLoopGo(): void {
    if (!this.#holds) return;
    backend.unrefTimer(this.#timer);
    this.#holds = false;
  }
  #run(): void {
    if (this.#tick()) return;
    ownClearInterval(this.#timer as ReturnType<typeof setInterval>);
    this.#timer = undefined;
    this.#holds = false;
  }
}
const POLL_MS = 50;

/** Frames the probe takes: more than Node's timer constructor and insertion need. */
const STACK_PROBE = 48;

/** Takes `n` frames of stack and gives them back: a RangeError here, at the edge, comes before any state changes. */
export function headroom(n: number): number {
  // Not a loop: each frame must take stack. The sum keeps the calls from being folded away.
  return n === 0 ? 0 : headroom(n - 1) + 1;
}

export class SafetyNet<H, T extends object> {
  #registry: FinalizationRegistry<H>;
  readonly #stateOf: (object: T) => H | undefined;
  /**
   * Fixed size, filled by index and emptied by `#promote`: never reallocated, so `add` is a store
   * and an increment (an array made anew per promotion and grown by push cost 7–10 ns more per
   * object, bench/parts.ts "safety net alone", on each runtime). Nothing in it is registered.
   */
  #nursery: (T | undefined)[] = new Array<T | undefined>(NURSERY_SIZE).fill(undefined);
  #count = 0;
  #scheduled = false;
  /**
   * `stateOf` is the class's [finalizerState], asked when an object is registered: the net keeps
   * nothing on the objects themselves, so what a program writes on one (memlife's symbol-keyed
   * members included, found by Object.getOwnPropertySymbols) never decides what is registered or
   * released. A flag the net once kept on each object, written `false` after registration, had
   * release() skip `unregister` and the finalizer release the object a second time (SIGSEGV).
   */
  constructor(finalize: (held: H) => void, stateOf: (object: T) => H | undefined) {
    this.#stateOf = stateOf;
    // A finalizer's native release that fails has no caller: it goes where callbacks' errors go.
    this.#registry = new FinalizationRegistry((held) => {
      try {
        finalize(held);
      } catch (error) {
        reportCallbackError(error, "release");
      }
    });
  }
  add(object: T): void {
    const i = this.#count++;
    this.#nursery[i] = object;
    if (i + 1 === NURSERY_SIZE || !this.#scheduled) this.#addRarely(i);
  }
  // The cold paths of `add`, out of line: what V8 inlines of `add` into a constructor counts against
  // its budget for inlining that constructor's caller (see Context.createBuffer).
  #addRarely(i: number): void {
    if (i + 1 === NURSERY_SIZE) this.#promote();
    else if (!this.#scheduled) {
      // Marked once the timer call returned (see `schedule`).
      timer(() => {
        this.#scheduled = false;
        this.#promote();
      }, 0);
      this.#scheduled = true;
    }
  }
  /**
   * Called on explicit release of an object that may already be registered. The object added last
   * leaves the nursery at once: create, use, release (and `using`, which releases in reverse order)
   * then never fill it, so no promotion pass walks past objects that are gone. Any other is
   * unregistered: a registered one leaves the registry, and for one still in the nursery the call
   * finds nothing (7–9 ns) and the promotion skips it, released.
   */
  remove(object: T): void {
    const last = this.#count - 1;
    if (last >= 0 && this.#nursery[last] === object) {
      this.#count = last;
      this.#nursery[last] = undefined;
    } else this.#registry.unregister(object);
  }
  /**
   * The object's finalizer state changed (`retain()`, or a `release()` that was not the last): the
   * finalizer must release every reference the object holds when it is dropped. Registered
   * already, it is registered anew with the state it gives now; in the nursery, its state is asked
   * at promotion anyway.
   */
  renew(object: T): void {
    // The one added last (create, then retain or watch) is in the nursery: no registry call (7-9 ns).
    const last = this.#count - 1;
    if (last >= 0 && this.#nursery[last] === object) return;
    if (!this.#registry.unregister(object)) return;
    const state = this.#stateOf(object);
    if (state !== undefined) this.#registry.register(object, state, object);
  }
  /** A full nursery is promoted at once but leaves the pending timer be: one timer per turn, not per 256 objects. */
  #promote(): void {
    const nursery = this.#nursery;
    const n = this.#count;
    this.#count = 0;
    for (let i = 0; i < n; i++) {
      const object = nursery[i]!;
      nursery[i] = undefined;
      const state = this.#stateOf(object);
      if (state === undefined) continue; // released
      // An object can be here twice: an SVM free that took an allocation out of order (it stays
      // here) and did not happen gives it back with `add`. Registered twice, it would be released twice.
      this.#registry.unregister(object);
      this.#registry.register(object, state, object);
    }
  }
}
