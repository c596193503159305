/**
 * The JS side of ffi/deferred.c: `event` callbacks a native call made on the JS thread, queued in
 * C and run here as that call returns. One `Deferral` per compiled copy of deferred.c (Bun's relay,
 * the prebuilt library of Node). The backend gives it views of deferred.c's memory and the form its
 * own callbacks give pointers in, registers each `event` slot's callback, and binds each `reentrant`
 * symbol through `defer_call` with `bind`.
 */
import type { NativeFunction, NativeType, SymbolDef } from "./types.ts";
import { microtask } from "./own-timers.ts";

/** Must match deferred_call in deferred.c: 6 arguments of two words, the slot, a pad. */
const WORDS = 14;
const SLOT = 12;
/** Must match defer_call in deferred.c: the arguments it forwards, all in registers. */
const ARGS = 5;
/** A queued call's slot word once it was taken: never run twice. */
const TAKEN = 0xffffffff;

/** Whether defer_call can forward the symbol: up to 5 integer or pointer arguments, in registers. */
export function deferringFits(def: SymbolDef): boolean {
  const floating = (t: NativeType) => t === "f32" || t === "f64";
  return def.args.length <= ARGS && !def.args.some(floating) && !floating(def.returns);
}

export class Deferral {
  /** Per slot: calls its callback with the arguments of the queued call at word `at` of `queue`. */
  readonly #calls: ((queue: Uint32Array, at: number) => void)[] = [];
  /** deferred_state: [0] calls queued, [1] deferring calls and runs in progress, [2] capacity. */
  readonly #state: Int32Array;
  #queue: Uint32Array = new Uint32Array(0);
  /** A view of the queue's `byteLength` bytes where it is now (it moves when C grows it). */
  readonly #view: (byteLength: number) => Uint32Array;
  /** A pointer argument, from its two words, as the backend's own callbacks give it. */
  readonly #pointer: (low: number, high: number) => unknown;
  /** A run stopped at the edge of the stack: the runs it is inside stop too (see `run`). */
  #stopped = false;
  /** A microtask is queued to run what stopped runs left. */
  #pending = false;
  /** Queues a microtask: ffi/own-timers.ts `microtask`, which a program's fake timers cannot replace. */
  readonly #microtask: (fn: () => void) => void;

  /** `queue` is for tests, which play the edge of the stack with one that throws RangeError. */
  constructor(
    state: Int32Array,
    view: (byteLength: number) => Uint32Array,
    pointer: (low: number, high: number) => unknown,
    queue: (fn: () => void) => void = microtask,
  ) {
    this.#state = state;
    this.#view = view;
    this.#pointer = pointer;
    this.#microtask = queue;
  }

  /** Slot `slot`'s queued calls go to `fn`, with arguments of `types`. */
  slot(slot: number, types: readonly NativeType[], fn: (...args: unknown[]) => unknown): void {
    const arg = (t: NativeType, q: Uint32Array, at: number, i: number) => this.#arg(t, q, at, i);
    const [t0, t1, t2, t3] = types;
    // Spelled out per arity: no array per call. Taken once its arguments are read: at the edge of
    // the stack reading one may throw (Node makes a bigint of a pointer), and the call then stays
    // queued, whole, for a later run.
    switch (types.length) {
      case 0:
        this.#calls[slot] = (q, at) => {
          q[at + SLOT] = TAKEN;
          fn();
        };
        break;
      case 1:
        this.#calls[slot] = (q, at) => {
          const a = arg(t0, q, at, 0);
          q[at + SLOT] = TAKEN;
          fn(a);
        };
        break;
      case 2:
        this.#calls[slot] = (q, at) => {
          const a = arg(t0, q, at, 0), b = arg(t1, q, at, 1);
          q[at + SLOT] = TAKEN;
          fn(a, b);
        };
        break;
      case 3:
        this.#calls[slot] = (q, at) => {
          const a = arg(t0, q, at, 0), b = arg(t1, q, at, 1), c = arg(t2, q, at, 2);
          q[at + SLOT] = TAKEN;
          fn(a, b, c);
        };
        break;
      case 4:
        this.#calls[slot] = (q, at) => {
          const a = arg(t0, q, at, 0), b = arg(t1, q, at, 1), c = arg(t2, q, at, 2), d = arg(t3, q, at, 3);
          q[at + SLOT] = TAKEN;
          fn(a, b, c, d);
        };
        break;
      default:
        this.#calls[slot] = (q, at) => {
          const args = types.map((t, i) => arg(t, q, at, i));
          q[at + SLOT] = TAKEN;
          fn(...args);
        };
    }
  }

  /**
   * `call(target, ...args)` (defer_call bound with the symbol's types), then the calls it queued.
   * The calls queued before it are another's: a deferring call's or a run's in progress, or left
   * by a run the edge of the stack stopped, which only a microtask runs (see `run`).
   */
  bind(call: (...args: unknown[]) => unknown, target: unknown, arity: number): NativeFunction {
    const state = this.#state;
    const run = (from: number) => this.run(from);
    // Fixed arities: no rest array per call on the hot release paths.
    switch (arity) {
      case 0:
        return () => {
          const mine = state[0];
          const v = call(target);
          if (state[0] !== mine) run(mine);
          return v;
        };
      case 1:
        return (a: unknown) => {
          const mine = state[0];
          const v = call(target, a);
          if (state[0] !== mine) run(mine);
          return v;
        };
      case 2:
        return (a: unknown, b: unknown) => {
          const mine = state[0];
          const v = call(target, a, b);
          if (state[0] !== mine) run(mine);
          return v;
        };
      default:
        return (...args: unknown[]) => {
          const mine = state[0];
          const v = call(target, ...args);
          if (state[0] !== mine) run(mine);
          return v;
        };
    }
  }

  /**
   * Runs the calls queued from index `from` on, oldest first (those before it wait for the
   * deferring call or run that queued them), and drops them. Each is marked taken as it is entered,
   * so none runs twice; one that throws does not stop the others: the first exception is rethrown
   * after them, as a callback's would have come out of the native call. Only plain stores after
   * the loop.
   *
   * At the edge of the stack a call may not be entered (its arguments cannot be read). The runs in
   * progress then stop, and what they leave runs on a microtask, on a fresh stack, as if the driver
   * had called from its own thread; never inside a later call at the edge, where a callback lost
   * to the stack would be one whose call had returned (a `wait()` left owing for ever). Where not
   * even a microtask can be queued, the call throws, which tells its caller that the callbacks may
   * never come; the microtask is then queued by the next run that ends with calls left.
   */
  run(from: number): void {
    const state = this.#state;
    let next = from;
    let failed = false;
    let failure: unknown;
    state[1]++;
    try {
      // A deferring call made by a callback here runs its own calls and drops them before it returns.
      while (next < state[0] && !this.#stopped) {
        // Grown (by a call a callback made): the old queue was freed.
        if (this.#queue.length !== state[2] * WORDS) this.#queue = this.#view(state[2] * WORDS * 4);
        const queue = this.#queue, at = next * WORDS;
        const slot = queue[at + SLOT];
        if (slot !== TAKEN) {
          try {
            this.#calls[slot](queue, at);
          } catch (error) {
            // Not entered (the queue cannot have grown then, so `queue` is still its memory).
            if (queue.length === state[2] * WORDS && queue[at + SLOT] !== TAKEN) {
              if (!this.#later()) throw error;
              this.#stopped = true;
              break;
            }
            if (!failed) {
              failed = true;
              failure = error;
            }
          }
        }
        next++;
      }
    } finally {
      if (next >= state[0]) state[0] = from;
      if (--state[1] === 0) {
        this.#stopped = false;
        // Calls left by a run that threw: the microtask could not be queued then. Caught: in a
        // `finally`, a RangeError here would replace the run's own outcome.
        if (state[0] !== 0 && !this.#pending) {
          try {
            this.#later();
          } catch {
            // The next run that ends with calls left queues it.
          }
        }
      }
    }
    if (failed) throw failure;
  }

  /** Whether a microtask will run the calls a run left (queued now where it was not yet). */
  #later(): boolean {
    if (this.#pending) return true;
    try {
      this.#microtask(this.#leftovers);
      this.#pending = true;
      return true;
    } catch {
      return false;
    }
  }

  /** Runs the calls runs left, on a fresh stack; those queued meanwhile by calls in progress wait. */
  readonly #leftovers = (): void => {
    this.#pending = false;
    if (this.#state[1] === 0 && this.#state[0] !== 0) this.run(0);
  };

  /** Argument i of a queued call (two 32-bit words, normalised by C), as a callback gets it. */
  #arg(t: NativeType, queue: Uint32Array, at: number, i: number): unknown {
    const low = queue[at + 2 * i], high = queue[at + 2 * i + 1];
    switch (t) {
      case "bool":
        return low !== 0;
      case "i32":
        return low | 0;
      case "u32":
        return low;
      case "ptr":
      case "buffer":
      case "cstring":
      case "fn":
        return this.#pointer(low, high);
      case "i64":
      case "isize":
        if (high >= 0x80000000) {
          const v = (BigInt(high) << 32n | BigInt(low)) - (1n << 64n);
          return v >= -9007199254740991n ? Number(v) : v;
        }
      // falls through: a non-negative value reads as unsigned
      default:
        return high < 0x200000 ? high * 0x100000000 + low : BigInt(high) << 32n | BigInt(low);
    }
  }
}
