/**
 * The contract between the runtime-neutral core (`src/`) and one backend per runtime
 * (`ffi/bun.ts`, `ffi/deno.ts`, `ffi/node.ts`). Types and data only: importing this file
 * loads no runtime module.
 *
 * Value conventions, the same on every backend:
 * - `ptr`: an opaque {@link Pointer}; native NULL is `null` both ways.
 * - 64-bit integers (`i64 u64 isize usize`): accept `number | bigint`; come back as `number`
 *   when the value is a safe integer, else `bigint`.
 * - `buffer` (arguments only): an ArrayBufferView (or `null`); the callee sees the view's first
 *   byte, no copy, for the duration of the call.
 * - `cstring` (arguments only): a JS string passed as a NUL-terminated UTF-8 copy.
 * - `fn` (arguments only): a {@link Callback} from `Backend.callback`, or `null`.
 * - `user_data`-style arguments are declared `usize`, not `ptr`: the core passes small integer
 *   ids there (the C ABI passes both identically), so no pointer object is made per call.
 * - `id` (callback arguments only): such a `user_data` coming back, an id the core passed, which
 *   is below 2^32 (an index of an IdTable, src/callbacks.ts): a `number`, read from the low 32 bits
 *   of the pointer-sized argument where that is cheaper (Deno, which makes a BigInt of every 64-bit
 *   callback argument: 17 ns a call on this repository's VM, bench/callback-args.ts).
 */

/** An opaque native pointer. Each backend keeps its own representation; never inspect it. */
export type Pointer = { readonly __memlifePointer: never };

export type NativeType =
  | "void"
  | "bool"
  | "i32"
  | "u32"
  | "i64"
  | "u64"
  | "isize"
  | "usize"
  | "id"
  | "f32"
  | "f64"
  | "ptr"
  | "buffer"
  | "cstring"
  | "fn";

export interface SymbolDef {
  readonly args: readonly NativeType[];
  readonly returns: NativeType;
  /** A library version may lack it; the symbol is then `undefined` instead of failing the load. */
  readonly optional?: boolean;
  /** The call can wait on a thread that calls back into JS: the backend also binds it in `async`. */
  readonly blocking?: boolean;
  /**
   * With `blocking`, for a function of one pointer argument or none, returning nothing or a u64:
   * `async` runs it on the thread that ran the previous such call when that thread is
   * free (a lane, ffi/lane.c), not on whichever thread of the runtime's pool is next, and holds no
   * thread of that pool meanwhile (Deno and Node; every async call of Bun's runs on a lane). Where
   * the prebuilt library is absent (Deno and Node: another platform, a Worker), `async` is the
   * runtime's plain one.
   */
  readonly sameThread?: boolean;
  /**
   * Native code may call a JS callback synchronously, on the calling thread, during the call
   * (PoCL runs destructor callbacks inside clReleaseMemObject; Embree calls the memory monitor and
   * the error function inside the call that allocates or fails). Deno must keep such a symbol off
   * V8's fast-call path: a lazy deoptimization of the caller while the callback runs aborts the
   * process ("Lazy deopt after a fast API call with return value is unsupported").
   * `NativeLibrary.unguarded` has the unprotected binding, for calls known not to call back.
   */
  readonly reentrant?: boolean;
}
export type SymbolTable = Readonly<Record<string, SymbolDef>>;

// deno-lint-ignore no-explicit-any
export type NativeFunction = (...args: any[]) => any;

export interface NativeLibrary<T extends SymbolTable> {
  /** The path that was opened. */
  readonly path: string;
  /** Synchronous bindings; an absent optional symbol is `undefined`. */
  readonly symbols: { readonly [K in keyof T]: NativeFunction };
  /**
   * The same bindings, without the protection `reentrant` entries get: only for a call the caller
   * knows cannot call back into JS (a buffer with no destructor callback registered), where it
   * keeps the runtime's fastest call. Identical to `symbols` on backends that need no protection.
   */
  readonly unguarded: { readonly [K in keyof T]: NativeFunction };
  /**
   * Bindings for the entries marked `blocking`, run off the JS thread so that the JS thread stays
   * free to answer callbacks while the call waits. Resolve with the return value.
   */
  readonly async: { readonly [K in keyof T]: (...args: unknown[]) => Promise<unknown> };
}

/**
 * How a callback is delivered.
 * - `event`: returns void. Native code may call it from any thread. On the JS thread it may run
 *   synchronously inside the native call; from another thread it runs later on the JS thread. Bun:
 *   the native caller goes on at once (Bun's event relay slots). Deno and Node, with the prebuilt
 *   library (ffi/event-relay.c): a `burst` callback's caller goes on at once. Any other: on Node,
 *   of the threads calling at once one waits while JS takes every queued call and the others go
 *   on; on Deno each caller waits for its own call. Without the library (another platform, a
 *   Worker) each caller waits until the JS thread ran its call. The core defers user code itself.
 * - `sync`: native code needs the return value, or needs the arguments to stay valid until JS has
 *   read them. From another thread, the native caller blocks until JS on the JS thread returned.
 *   The JS thread must therefore never block in a native call that waits on such a thread: use
 *   `async` bindings for those.
 */
export type Delivery = "event" | "sync";

/**
 * A native callback signature. What the JS function returns becomes the C value as JS truthiness
 * and C would convert it, the same on every backend: for `bool`, any truthy value is true and any
 * falsy one, `undefined` included, is false (a function that forgets to return refuses: Bun and
 * Deno do so themselves, ffi/node.ts converts for koffi); for `i32`/`u32`, the number truncated
 * to 32 bits. test/ledger.spec.ts checks `bool`. The core always returns the exact type and relies
 * on none of this.
 */
export interface CallbackDef {
  readonly args: readonly NativeType[];
  readonly returns: "void" | "bool" | "i32" | "u32";
  readonly delivery: Delivery;
  /**
   * An `event` callback that native code calls many times in a row from the thread doing the
   * work (an SVM free per allocation, from the queue's worker): the event relay of Deno and Node
   * lets that thread go on at once instead of waiting for the JS thread (ffi/event-relay.c).
   */
  readonly burst?: boolean;
  /**
   * A `sync` callback that native code calls from another thread only on the thread of one of the
   * backend's async calls, while it runs (Embree reports an error on the thread that made the API
   * call: a commit's). A Worker's backend may then take such a call where it takes that call's
   * completion instead of through a thread-safe callback, which crashed Bun once the Worker was
   * terminated (ffi/bun-relay.c, MODE_KEPT).
   */
  readonly onAsyncThreads?: boolean;
}
export type CallbackTable = Readonly<Record<string, CallbackDef>>;

/** A native function pointer made by a backend. It lives for the whole process and is never closed. */
export type Callback = { readonly __memlifeCallback: never };

/**
 * Per-`user_data` memory accounts for a monitor-shaped callback `(usize id, isize bytes, bool post)
 * -> bool` (Embree's), kept in native code (ffi/ledger.c): while an id does not forward, its calls
 * are counted, checked against its budget and answered without reaching JS at all, on any thread.
 * Bun compiles it with TinyCC (ffi/bun-relay.c); Deno and Node load it prebuilt
 * (ffi/native-ledger.ts) and, where it is absent, keep the accounts in JS (ffi/js-ledger.ts), where
 * every call forwards. A forwarded call goes to `forward` on the JS thread (delivery `sync`), which
 * answers with `apply`. test/ledger-cases.ts is the rule all of them follow.
 */
export interface MemoryLedger {
  /** The native function to hand to the library, with the id as `user_data`. */
  readonly callback: Callback;
  /** Whether calls of an account that does not forward are settled in native code, with no JS. */
  readonly settlesNatively: boolean;
  /** Makes `id`'s account empty, with no budget and no forwarding (ids are reused). */
  reset(id: number): void;
  setForward(id: number, forward: boolean): void;
  setBudget(id: number, budget: number | null): void;
  /**
   * Settles a forwarded call with JS's answer, under the same lock as native calls: counts it by
   * the seed's rule and returns 0 (allowed), 1 (refused by the budget) or 2 (refused by `answer`).
   */
  apply(id: number, bytes: number, post: boolean, answer: boolean): number;
  /**
   * The account: bytes, peak, calls, denied, budget refusals, calls settled natively, and the
   * bytes asked and the live bytes at the last budget refusal.
   */
  read(id: number): LedgerFigures;
}

export interface LedgerFigures {
  bytes: number;
  peak: number;
  calls: number;
  denied: number;
  budgetDenied: number;
  native: number;
  lastRefused: number;
  lastRefusedLive: number;
}

export interface OpenOptions {
  /**
   * Keep the library and its dependencies mapped until the process ends (dlopen with
   * RTLD_NODELETE first, see ffi/keep-loaded.ts): for a library whose threads may still run while
   * the runtime unloads libraries at exit (Embree's TBB workers). Does nothing where there is no
   * libc `dlopen` (Windows).
   */
  readonly keepLoaded?: boolean;
}

export interface Backend {
  readonly runtime: "bun" | "deno" | "node";
  /** Whether this realm is a Worker: native threads may outlive it (see src/worker.ts). */
  readonly inWorker: boolean;
  /**
   * How many native callbacks the core awaits (src/callbacks.ts, `owe`), which it keeps here: in
   * memory that never moves, read by the event relay's C (ffi/event-relay.c): with several
   * awaited, a driver thread's call is left to the relay thread instead of waiting for JS.
   */
  readonly callbacksAwaited: Int32Array;
  /**
   * Open one library and bind its table. Throws (with the runtime's message) when the library
   * cannot be opened or a non-optional symbol is missing.
   */
  open<T extends SymbolTable>(path: string, table: T, options?: OpenOptions): NativeLibrary<T>;
  /** Make a process-lifetime callback. Exceptions thrown by `fn` must be caught by the caller (the core). */
  callback(def: CallbackDef, fn: (...args: never[]) => unknown): Callback;
  /**
   * Pointer to the first byte of a view. The view's memory must not move (call `view.buffer` first).
   * The same on every backend: an empty view has no byte to point to (RangeError; as a `buffer`
   * argument it may go down as NULL, so pass one byte of your own for a size-0 call), and a view
   * of a detached ArrayBuffer is a TypeError.
   */
  pointerOf(view: ArrayBufferView): Pointer;
  address(pointer: Pointer | null): bigint;
  fromAddress(address: bigint): Pointer | null;
  /**
   * `fromAddress(slots[index])`: the pointer C wrote into a `BigUint64Array` (an out-argument, a
   * list it filled). Where pointers are numbers (Bun) it reads the two 32-bit words instead, with
   * no BigInt made on the way (JavaScriptCore allocates one per element read: 19 ns).
   */
  readPointer(slots: BigUint64Array, index: number): Pointer | null;
  /** `slots[index] = address(pointer)`, for a list C reads; on Bun by words, as `readPointer`. */
  writePointer(slots: BigUint64Array, index: number, pointer: Pointer | null): void;
  /** Native memory as an ArrayBuffer, no copy. The caller keeps the memory alive while it is used. */
  arrayBuffer(pointer: Pointer, byteLength: number): ArrayBuffer;
  /** Read a NUL-terminated UTF-8 string. */
  readCString(pointer: Pointer): string;
  /** The accounts for a monitor-shaped callback; at most one per process (Bun's is native). */
  memoryLedger(def: CallbackDef, forward: (id: number, bytes: number, post: boolean) => boolean): MemoryLedger;
  /**
   * Let a timer from `setInterval` run without keeping the process alive. Typed `unknown`: Node
   * and Bun return objects, Deno numbers, and the declarations must not need the runtimes' types.
   */
  unrefTimer(timer: unknown): void;
  /** Let such a timer keep the process alive again (undoes `unrefTimer`). */
  refTimer(timer: unknown): void;
  /**
   * Called before memlife reads the environment variable `envVar` on its way to a native call:
   * throws one error naming every runtime permission it lacks (Deno: `--allow-ffi`, `--allow-env`).
   * Absent where the runtime has no permissions.
   */
  requirePermissions?(envVar: string): void;
  /**
   * Runs `fn` holding a lock that every thread of the process takes alike, whichever isolate runs
   * on it (the files of `deno test --parallel`, Workers): ffi/process-lock.ts.
   */
  exclusive<T>(fn: () => T): T;
  /**
   * A 32-bit word of memory that every realm of the process sees alike, for a lock taken with
   * `Atomics.compareExchange` around one native call (ffi/process-lock.ts, `processWord`).
   */
  processWord(): Int32Array;
}
