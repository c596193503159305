/**
 * The Deno backend: `Deno.dlopen`, `Deno.UnsafeCallback`, `Deno.UnsafePointer(View)`.
 *
 * What Deno 2.9 does that shapes this file (the figures: README, "Measured facts behind the code"):
 * - 64-bit integers come back as bigints, and a fast call takes a 64-bit parameter as a bigint
 *   only: symbols and callbacks with one get a converting wrapper (`adapt`, `widening`,
 *   `narrowing`); every other symbol is Deno's own function, untouched.
 * - A JS callback that runs inside a V8 fast call aborts the process when the caller is deoptimized
 *   meanwhile, and the flag that kept a symbol off the fast path is gone
 *   (https://github.com/denoland/deno/pull/24367; for the abort, no upstream issue found):
 *   `reentrant` symbols are called with one argument more than declared (`offFastPath`).
 * - A missing `optional: true` symbol is `null`, but its `nonblocking` twin is a function that rejects.
 * - One thread-safe callback gives both deliveries: on the JS thread it runs inside the native
 *   call, from another thread the caller blocks until the JS thread ran it. Calls that wait on
 *   such threads therefore go through `async` (Deno `nonblocking`).
 * - An exception thrown by a callback is swallowed (the native caller gets 0 / false): the core
 *   catches first.
 * - Callbacks are never closed: closing one that native code can still call is undefined
 *   behaviour (https://github.com/denoland/deno/pull/14663, the review of `close()`). They are
 *   `unref`ed so that they alone do not keep the process alive.
 * - Leaving the process while an async call runs can crash; see "exiting" below.
 *
 * The Deno global is reached through a minimal local interface instead of `lib.deno.ns`, so that
 * this file also type-checks under plain `tsc`, where Deno's types are not installed.
 */
import type {
  Backend,
  Callback,
  CallbackDef,
  NativeFunction,
  NativeLibrary,
  NativeType,
  OpenOptions,
  Pointer,
  SymbolDef,
  SymbolTable,
} from "./types.ts";
import * as nodeTimers from "node:timers";
import { laneAsync, ledgerMaker, nativeLedgerPath, nativeLibraryOnce } from "./native-ledger.ts";
import { holdWith, useTimers } from "./own-timers.ts";
import { relayedCallbacks } from "./event-relay.ts";
import { keepLoader } from "./keep-loaded.ts";
import { processLock, processWord } from "./process-lock.ts";
import { ownBytes, pointable } from "./views.ts";
import { libcPaths, libcSymbols } from "./symbols/libc.ts";

// node:timers, not the globals a program may fake before memlife loads (ffi/own-timers.ts): Deno's
// calls the runtime's timers, whatever the globals are. With the globals faked first, memlife's hold
// on the event loop was a fake, and a program ended, exit code 0, before an owed onFree (a kernel
// between its gate and the free: test/fixtures/fake-timers-before.ts "slow").
useTimers(nodeTimers);

/** How every message of this backend starts. */
const PREFIX = "memlife: ";

// --- the slice of the Deno FFI API this file uses ------------------------------------------------

/** Deno's `PointerObject`: an opaque object, or null for NULL. */
type DenoPointer = object;

type DenoNativeType =
  | "void"
  | "bool"
  | "i32"
  | "u32"
  | "i64"
  | "u64"
  | "isize"
  | "usize"
  | "f32"
  | "f64"
  | "pointer"
  | "buffer"
  | "function";

interface DenoForeignFunction {
  name?: string;
  parameters: DenoNativeType[];
  result: DenoNativeType;
  nonblocking?: boolean;
  optional?: boolean;
}

interface DenoUnsafeCallback {
  readonly pointer: DenoPointer;
  unref(): number;
}

interface DenoFfi {
  dlopen(
    path: string,
    symbols: Record<string, DenoForeignFunction>,
  ): { readonly symbols: Record<string, NativeFunction | null> };
  UnsafeCallback: {
    threadSafe(
      definition: { parameters: DenoNativeType[]; result: DenoNativeType },
      callback: NativeFunction,
    ): DenoUnsafeCallback;
  };
  UnsafePointer: {
    of(value: ArrayBufferView): DenoPointer | null;
    value(pointer: DenoPointer | null): number | bigint;
    create(address: bigint): DenoPointer | null;
  };
  UnsafePointerView: {
    getArrayBuffer(pointer: DenoPointer, byteLength: number): ArrayBuffer;
    getCString(pointer: DenoPointer): string;
  };
  readonly exitCode: number;
  readonly build: { readonly os: string; readonly arch: string };
  permissions: {
    querySync(descriptor: { name: "ffi" } | { name: "env"; variable: string }): { readonly state: string };
  };
  errors: { NotCapable: new (message: string) => Error };
  unrefTimer(id: number): void;
  refTimer(id: number): void;
}

const Deno = (globalThis as unknown as { Deno: DenoFfi }).Deno;

// --- type mapping --------------------------------------------------------------------------------

const typeMap: Record<NativeType, DenoNativeType> = {
  void: "void",
  bool: "bool",
  i32: "i32",
  u32: "u32",
  i64: "i64",
  u64: "u64",
  isize: "isize",
  usize: "usize",
  // The low 32 bits of the pointer-sized argument (both ABIs Deno runs on are little-endian): a
  // number, with no BigInt made per call.
  id: "u32",
  f32: "f32",
  f64: "f64",
  ptr: "pointer",
  buffer: "buffer",
  // Encoded by the wrapper into a NUL-terminated Uint8Array.
  cstring: "buffer",
  fn: "function",
};

function resultType(type: NativeType, where: string): DenoNativeType {
  if (type === "buffer" || type === "cstring" || type === "fn") {
    throw new TypeError(`${PREFIX}${where}: "${type}" is an argument-only type; declare the result "ptr"`);
  }
  return typeMap[type];
}

function isWide(type: NativeType): boolean {
  return type === "i64" || type === "u64" || type === "isize" || type === "usize";
}

/** Deno gives bigint for every 64-bit integer; the contract wants number where that is exact. */
function narrow(value: bigint): number | bigint {
  return value <= 9007199254740991n && value >= -9007199254740991n ? Number(value) : value;
}

const encoder = new TextEncoder();

function encodeCString(value: unknown, where: string): Uint8Array | null {
  if (value === null || value === undefined) return null;
  if (typeof value !== "string") throw new TypeError(`${PREFIX}${where}: expected a string, got ${typeof value}`);
  return encoder.encode(value + "\0");
}

/**
 * The raw Deno function when the contract's conventions need no conversion; otherwise a wrapper
 * that turns number arguments of 64-bit parameters into bigints (see `widening`), encodes
 * `cstring` arguments and narrows a 64-bit result.
 */
function adapt(raw: NativeFunction, def: SymbolDef, name: string, guard: boolean): NativeFunction {
  const strings = def.args.flatMap((type, index) => (type === "cstring" ? [index] : []));
  const wideResult = isWide(def.returns);
  const base = guard && def.reentrant ? offFastPath(raw, def.args.length) : raw;
  const fn = def.args.some(isWide) ? widening(base, def.args.map(isWide)) : base;
  if (strings.length === 0 && !wideResult) return fn;
  return (...args: unknown[]) => {
    for (const index of strings) args[index] = encodeCString(args[index], name);
    const result = fn(...args);
    return wideResult ? narrow(result as bigint) : result;
  };
}

/**
 * A number for a 64-bit parameter, as the bigint Deno's fast call takes. TurboFan turns
 * `BigInt(x)` into a plain 64-bit value, with no BigInt on the heap, only where it knows x is an
 * int32; `BigInt(x)` of any other number calls into the runtime to allocate one, +20-35 ns a call
 * (createBuffer + release on Deno: 1.55x the raw calls with a constant bigint, 1.15-1.3x with the
 * int32 test; bench/parts.ts). Where the wrapper is inlined into a caller that passes a constant,
 * either form folds away.
 */
const big = (value: unknown): unknown =>
  typeof value === "number" ? ((value | 0) === value ? BigInt(value | 0) : BigInt(value)) : value;

/**
 * `big` for one parameter of one symbol, remembering the last number it converted: loops pass the
 * same size and flags call after call, and returning the bigint made last time skips BigInt's
 * 10 ns (bench/parts.ts "raw via memlife binding": 1.15x -> 1.02-1.05x the raw calls with a
 * constant bigint). It keeps one small bigint alive. The check inlined into callers is under
 * V8's 28 bytes of bytecode that inline for free: with the conversion written inside it (62
 * bytes), createBuffer + release no longer fit TurboFan's budget with the Buffer constructor
 * (`--trace-turbo-inlining`) and the loop was no faster than with `big`.
 */
function bigWithMemory(): (value: unknown) => unknown {
  let lastNumber = 0;
  let lastBig: unknown = 0n;
  // Out of line: the check that V8 inlines into every caller stays a few bytes of bytecode, which
  // leaves TurboFan's inlining budget to the caller's own code (see Context.createBuffer).
  const convert = (value: unknown): unknown => {
    if (typeof value !== "number") return value;
    lastBig = (value | 0) === value ? BigInt(value | 0) : BigInt(value);
    lastNumber = value;
    return lastBig;
  };
  return (value) => (value === lastNumber ? lastBig : convert(value));
}

/**
 * Calls `raw` with one argument more than its `arity` declared parameters. V8 turns a call into a
 * fast API call only when the argument count equals the C signature's (GetFastApiCallTarget), so
 * every such call takes the regular API path, during which a JS callback may deoptimize the
 * caller safely; Deno's slow path reads the declared parameters and ignores the rest. The
 * cheapest way off the fast path (README, "Measured facts behind the code").
 */
function offFastPath(raw: NativeFunction, arity: number): NativeFunction {
  const x = undefined;
  type A = unknown;
  switch (arity) {
    case 0:
      return () => raw(x);
    case 1:
      return (a: A) => raw(a, x);
    case 2:
      return (a: A, b: A) => raw(a, b, x);
    case 3:
      return (a: A, b: A, c: A) => raw(a, b, c, x);
    case 4:
      return (a: A, b: A, c: A, d: A) => raw(a, b, c, d, x);
    case 5:
      return (a: A, b: A, c: A, d: A, e: A) => raw(a, b, c, d, e, x);
    case 6:
      return (a: A, b: A, c: A, d: A, e: A, f: A) => raw(a, b, c, d, e, f, x);
    case 7:
      return (a: A, b: A, c: A, d: A, e: A, f: A, g: A) => raw(a, b, c, d, e, f, g, x);
    case 8:
      return (a: A, b: A, c: A, d: A, e: A, f: A, g: A, h: A) => raw(a, b, c, d, e, f, g, h, x);
    default:
      return (...args: unknown[]) => {
        args.length = arity;
        return raw(...args, x);
      };
  }
}

/**
 * Deno's fast call (turbocall) takes a 64-bit parameter as a bigint only: a number there deopts
 * the caller ("not a BigInt") over and over (3x slower; README, "Measured facts behind the code").
 * The conversion happens here, in a wrapper of the symbol's exact arity (a fast call needs the
 * declared argument count) that V8 inlines.
 */
function widening(raw: NativeFunction, wide: boolean[]): NativeFunction {
  const [w0, w1, w2, w3, w4, w5, w6, w7, w8] = wide;
  const [b0, b1, b2, b3, b4, b5, b6, b7, b8] = wide.map(() => bigWithMemory());
  type A = unknown;
  switch (wide.length) {
    case 1:
      return (a: A) => raw(w0 ? b0(a) : a);
    case 2:
      return (a: A, b: A) => raw(w0 ? b0(a) : a, w1 ? b1(b) : b);
    case 3:
      return (a: A, b: A, c: A) => raw(w0 ? b0(a) : a, w1 ? b1(b) : b, w2 ? b2(c) : c);
    case 4:
      return (a: A, b: A, c: A, d: A) => raw(w0 ? b0(a) : a, w1 ? b1(b) : b, w2 ? b2(c) : c, w3 ? b3(d) : d);
    case 5:
      return (a: A, b: A, c: A, d: A, e: A) =>
        raw(w0 ? b0(a) : a, w1 ? b1(b) : b, w2 ? b2(c) : c, w3 ? b3(d) : d, w4 ? b4(e) : e);
    case 6:
      return (a: A, b: A, c: A, d: A, e: A, f: A) =>
        raw(w0 ? b0(a) : a, w1 ? b1(b) : b, w2 ? b2(c) : c, w3 ? b3(d) : d, w4 ? b4(e) : e, w5 ? b5(f) : f);
    case 7:
      return (a: A, b: A, c: A, d: A, e: A, f: A, g: A) =>
        raw(
          w0 ? b0(a) : a,
          w1 ? b1(b) : b,
          w2 ? b2(c) : c,
          w3 ? b3(d) : d,
          w4 ? b4(e) : e,
          w5 ? b5(f) : f,
          w6 ? b6(g) : g,
        );
    case 8:
      return (a: A, b: A, c: A, d: A, e: A, f: A, g: A, h: A) =>
        raw(
          w0 ? b0(a) : a,
          w1 ? b1(b) : b,
          w2 ? b2(c) : c,
          w3 ? b3(d) : d,
          w4 ? b4(e) : e,
          w5 ? b5(f) : f,
          w6 ? b6(g) : g,
          w7 ? b7(h) : h,
        );
    case 9:
      return (a: A, b: A, c: A, d: A, e: A, f: A, g: A, h: A, i: A) =>
        raw(
          w0 ? b0(a) : a,
          w1 ? b1(b) : b,
          w2 ? b2(c) : c,
          w3 ? b3(d) : d,
          w4 ? b4(e) : e,
          w5 ? b5(f) : f,
          w6 ? b6(g) : g,
          w7 ? b7(h) : h,
          w8 ? b8(i) : i,
        );
    default:
      return (...args: unknown[]) => raw(...args.map((value, index) => (wide[index] ? big(value) : value)));
  }
}

// --- async calls ---------------------------------------------------------------------------------

/** memlife's `async` calls running now. */
let asyncInFlight = 0;
/** A library was opened: its own threads (PoCL's compiler and workers, TBB) may be running. */
let libraryOpened = false;

/**
 * Wraps a `nonblocking` symbol. Deno reads a buffer argument's address when the call starts and
 * does not hold the view: the settle handlers below close over `args`, which keeps every view (and
 * encoded string) reachable until the call settled. Touching `.buffer` first moves a small
 * on-heap typed array's bytes off the V8 heap, so the address Deno read cannot move under the
 * worker thread when the GC compacts.
 */
function bindAsync(
  raw: NativeFunction,
  def: SymbolDef,
  name: string,
): (...args: unknown[]) => Promise<unknown> {
  const strings = def.args.flatMap((type, index) => (type === "cstring" ? [index] : []));
  const wideResult = isWide(def.returns);
  return (...args: unknown[]) => {
    let promise: Promise<unknown>;
    try {
      for (const index of strings) args[index] = encodeCString(args[index], name);
      for (const arg of args) if (ArrayBuffer.isView(arg)) void arg.buffer;
      promise = raw(...args);
    } catch (error) {
      return Promise.reject(error);
    }
    if (asyncInFlight++ === 0) guardExit();
    return promise.then(
      (result) => {
        asyncInFlight--;
        args.length = 0;
        return wideResult ? narrow(result as bigint) : result;
      },
      (error) => {
        asyncInFlight--;
        args.length = 0;
        throw error;
      },
    );
  };
}

// --- exiting with native calls in flight ---------------------------------------------------------

/**
 * Leaving the process while an async call still runs on a worker (an Embree commit, a clFinish)
 * crashes: `Deno.exit()` runs libc `exit()`, whose `_dl_fini` runs TBB's static destructors while
 * TBB workers still use them (abort), and an uncaught exception tears the isolate down under a
 * worker that is about to call back (SIGSEGV); how often: README, "Measured facts behind the
 * code"; no upstream issue found. RTLD_NODELETE does not help: it keeps code mapped, destructors
 * run anyway. The same holds with no call of memlife's in flight: PoCL compiles a kernel with LLVM
 * on a worker thread at its first enqueue and runs it there, and `exit()` destroys LLVM's statics
 * under it (SIGSEGV in 1 run of 10 that ends right after an enqueue; test/fixtures/
 * opencl-exit-running.ts). Only the driver knows when its threads are idle, so once a library is
 * open, both ways out end the process with `_exit(code)`, which runs no exit handlers. `unload`
 * listeners added after memlife's latest async call or library open do not run then.
 */
let hardExitFn: ((code: number) => void) | null | undefined;

function hardExit(code: number): void {
  if (hardExitFn === undefined) {
    hardExitFn = null;
    for (const path of libcPaths[Deno.build.os] ?? []) {
      try {
        hardExitFn = open(path, { _exit: libcSymbols._exit }).symbols._exit;
        break;
      } catch {
        // The next name; without libc, Deno exits its own way.
      }
    }
  }
  hardExitFn?.(code);
}

/** `Deno.exit(code)` dispatches `unload` with `Deno.exitCode` already set, then calls `exit()`. */
function onUnload(): void {
  if (libraryOpened) hardExit(Deno.exitCode);
}

/**
 * Deno ends the process after an `error` / `unhandledrejection` event that no listener prevented.
 * This listener runs last (see guardExit), so a program's own handler still decides first; if it
 * did not, print what Deno would have printed and leave through `_exit(1)`.
 */
function onUncaught(event: Event): void {
  if (!libraryOpened || event.defaultPrevented) return;
  event.preventDefault();
  const { error, reason } = event as Event & { error?: unknown; reason?: unknown };
  const inPromise = event.type === "unhandledrejection";
  try {
    console.error(`error: Uncaught${inPromise ? " (in promise)" : ""}`, inPromise ? reason : error);
  } catch {
    // A value that cannot be printed (a Proxy whose traps throw): the exit must still come.
    console.error(`error: Uncaught${inPromise ? " (in promise)" : ""} exception that could not be printed`);
  } finally {
    hardExit(1);
  }
}

const exitListeners: [string, (event: Event) => void][] = [
  ["unload", onUnload],
  ["error", onUncaught],
  ["unhandledrejection", onUncaught],
];

/**
 * In a Worker, `Deno.exit()` ends only that worker (and dispatches `unload` there): `_exit` would
 * end the whole process, so workers leave the guard out.
 */
/**
 * A web Worker's global scope is a WorkerGlobalScope; a node:worker_threads Worker's is not, but
 * has a global postMessage, which Deno's main thread lacks, and a `self` that is not the global
 * object, as it is on the main thread: both, so that a polyfilled postMessage on the main thread
 * does not count (node:worker_threads' isMainThread says "main" in web Workers, and importing it
 * costs every program 10 ms).
 */
const g = globalThis as { WorkerGlobalScope?: unknown; postMessage?: unknown; self?: unknown };
const inWorker = typeof g.WorkerGlobalScope === "function" ||
  (typeof g.postMessage === "function" && g.self !== globalThis);

/**
 * Under `deno test` and `deno bench` the runner owns the end of the process: each file's isolate
 * dispatches `unload` (and reports its uncaught errors as failures), then the runner goes on to the
 * next file, prints its summary and exits with its own code. `_exit` there ended the whole run at
 * the first file's `unload`, with code 0 even after a failed test (test/test-runners.spec.ts).
 * Deno marks a runner's isolate only in its internals: `installTestIsolateExitHandler` is there
 * under `deno test` and `deno bench`, not under `deno run` (Deno 2.9); the spec fails should that
 * change. The runner's own exit then takes its chances with the drivers' threads (README, Exit).
 */
const underRunner = (() => {
  // This module must load under Bun and Node too (src/backend.ts reports the mismatch): no Deno there.
  const internal = (Deno as unknown as { internal?: symbol } | undefined)?.internal;
  if (internal === undefined) return false;
  const internals = (Deno as unknown as Record<symbol, Record<string, unknown> | undefined>)[internal];
  return typeof internals?.installTestIsolateExitHandler === "function";
})();

/** (Re)installs the exit listeners at the end of each event's list when async work starts. */
function guardExit(): void {
  if (inWorker || underRunner) return;
  const target = globalThis as unknown as EventTarget;
  for (const [type, listener] of exitListeners) {
    target.removeEventListener(type, listener);
    target.addEventListener(type, listener);
  }
}

// --- open ----------------------------------------------------------------------------------------

/** Suffix of the second, `nonblocking` binding of a `blocking` entry. */
const ASYNC = "\u0000async";

/** Made on first use: this module must load anywhere, so that src/backend.ts can report a mismatch. */
let keepLoaded: ((path: string) => void) | undefined;

function open<T extends SymbolTable>(path: string, table: T, options?: OpenOptions): NativeLibrary<T> {
  if (options?.keepLoaded) (keepLoaded ??= keepLoader(open, readCString, Deno.build.os))(path);
  libraryOpened = true;
  guardExit();
  const definitions: Record<string, DenoForeignFunction> = {};
  for (const [name, def] of Object.entries(table)) {
    const parameters = def.args.map((type) => typeMap[type]);
    const result = resultType(def.returns, name);
    const optional = def.optional === true;
    definitions[name] = { parameters, result, optional };
    if (def.blocking) {
      definitions[name + ASYNC] = { name, parameters, result, optional, nonblocking: true };
    }
  }
  const raw = Deno.dlopen(path, definitions).symbols;

  const symbols: Record<string, NativeFunction | undefined> = {};
  const unguarded: Record<string, NativeFunction | undefined> = {};
  const async: Record<string, ((...args: unknown[]) => Promise<unknown>) | undefined> = {};
  for (const [name, def] of Object.entries(table)) {
    const fn = raw[name];
    symbols[name] = fn ? adapt(fn, def, name, true) : undefined;
    unguarded[name] = fn && def.reentrant ? adapt(fn, def, name, false) : symbols[name];
    if (def.blocking) {
      // Deno returns a (throwing) function, not null, for a missing optional nonblocking symbol:
      // the synchronous binding says whether the symbol exists.
      const nonblocking = raw[name + ASYNC];
      async[name] = !fn || !nonblocking ? undefined : (def.sameThread &&
        laneAsync(nativeLibrary(), path, name, def, { callback: relayed.callback, starting: guardExit })) ||
        bindAsync(nonblocking, def, name);
    }
  }
  // Copies, for fast-mode objects: filled by computed keys, the tables had gone to dictionary mode
  // (ffi/node.ts says what that cost).
  return {
    path,
    symbols: { ...symbols } as NativeLibrary<T>["symbols"],
    unguarded: { ...unguarded } as NativeLibrary<T>["unguarded"],
    async: async as NativeLibrary<T>["async"],
  };
}

// --- callbacks -----------------------------------------------------------------------------------

/** Every callback ever made: never closed, so native code may call it until the process ends. */
const immortal: DenoUnsafeCallback[] = [];

/** `fn` with its 64-bit arguments narrowed; spelled out per arity to keep the JS-thread path cheap. */
function narrowing(def: CallbackDef, fn: NativeFunction): NativeFunction {
  const wide = def.args.map(isWide);
  if (!wide.includes(true)) return fn;
  const n = (value: unknown, i: number) => (wide[i] ? narrow(value as bigint) : value);
  switch (def.args.length) {
    case 1:
      return (a) => fn(n(a, 0));
    case 2:
      return (a, b) => fn(n(a, 0), n(b, 1));
    case 3:
      return (a, b, c) => fn(n(a, 0), n(b, 1), n(c, 2));
    case 4:
      return (a, b, c, d) => fn(n(a, 0), n(b, 1), n(c, 2), n(d, 3));
    default:
      return (...args: unknown[]) => fn(...args.map(n));
  }
}

function plainCallback(def: CallbackDef, fn: (...args: never[]) => unknown): Callback {
  // Both deliveries use a thread-safe callback: on the JS thread it runs inside the native call,
  // from another thread the caller waits for the JS thread, which `sync` needs and `event` allows.
  const made = Deno.UnsafeCallback.threadSafe(
    {
      parameters: def.args.map((type) => typeMap[type]),
      result: resultType(def.returns, "callback"),
    },
    narrowing(def, fn as NativeFunction),
  );
  // threadSafe() refs the callback, which would keep the process alive forever. The core holds the
  // event loop open itself while it expects a call (and a pending async call holds it too).
  made.unref();
  immortal.push(made);
  return made.pointer as unknown as Callback;
}

// --- memory --------------------------------------------------------------------------------------

function pointerOf(view: ArrayBufferView): Pointer {
  // Materialising the ArrayBuffer moves an on-heap typed array's bytes off the V8 heap for good.
  pointable(view, PREFIX);
  // Of a view of memlife's own: Deno.UnsafePointer.of asks the view's prototype chain and reads its
  // `length`, and a Proxy there ran the program's code with an SVM memcpy's other pointer taken (a
  // release there had the copy write into freed memory: SIGSEGV).
  const pointer = Deno.UnsafePointer.of(ownBytes(view));
  if (pointer === null) throw new RangeError(`${PREFIX}pointerOf: the view has no memory to point to`);
  return pointer as unknown as Pointer;
}

function address(pointer: Pointer | null): bigint {
  return pointer === null ? 0n : (conversions ??= openConversions()).address(pointer);
}

function fromAddress(value: bigint): Pointer | null {
  return (conversions ??= openConversions()).pointer(value < 0n ? BigInt.asUintN(64, value) : value);
}

interface Conversions {
  pointer(address: bigint): Pointer | null;
  address(pointer: Pointer): bigint;
}

/**
 * Deno's own conversions, Deno.UnsafePointer.create and .value, are ops of 55-65 ns each (Deno
 * 2.9), and every command's event takes one, an SVM allocation's address and a wait another: two
 * of the ~250 ns of JS an SVM free took on Deno (bench/js-cost.ts). The prebuilt library's
 * memlife_pointer and memlife_address are fast FFI calls that return their argument as the other
 * type: 9 ns. Opened directly, not through `open()`, whose wrappers narrow a 64-bit result, and in
 * Workers too (they keep no state). Where the library is absent or cannot be opened: Deno's own.
 */
let conversions: Conversions | undefined;
/** For tests: which conversions this thread uses (the library's, or Deno's own where it is absent). */
export function pointerConversions(): "library" | "deno" {
  return (conversions ??= openConversions()).pointer === fallback.pointer ? "deno" : "library";
}
const fallback: Conversions = {
  pointer: (value) => Deno.UnsafePointer.create(value) as unknown as Pointer | null,
  address: (pointer) => BigInt(Deno.UnsafePointer.value(pointer as unknown as DenoPointer)),
};
function openConversions(): Conversions {
  const path = nativeLedgerPath(platform());
  if (path !== null) {
    try {
      const s = Deno.dlopen(path, {
        memlife_pointer: { parameters: ["u64"], result: "pointer" },
        memlife_address: { parameters: ["pointer"], result: "u64" },
      }).symbols;
      return {
        pointer: s.memlife_pointer as unknown as Conversions["pointer"],
        address: s.memlife_address as unknown as Conversions["address"],
      };
    } catch {
      // Absent, built from older sources, or denied (--deny-ffi).
    }
  }
  return fallback;
}

function arrayBuffer(pointer: Pointer, byteLength: number): ArrayBuffer {
  return Deno.UnsafePointerView.getArrayBuffer(pointer as unknown as DenoPointer, byteLength);
}

function readCString(pointer: Pointer): string {
  return Deno.UnsafePointerView.getCString(pointer as unknown as DenoPointer);
}

// --- permissions ---------------------------------------------------------------------------------

/** Environment variables Deno has let us read; once --allow-ffi is there too, nothing to ask again. */
const readable = new Set<string>();

/**
 * Without --allow-ffi, dlopen fails with a message that memlife would report as a library that is
 * not installed; without --allow-env, reading OPENCL_LIBRARY throws (or prompts) before that. So
 * ask Deno first, without prompting, and name every missing flag in one error.
 */
function requirePermissions(envVar: string): void {
  if (readable.has(envVar)) return;
  const missing: string[] = [];
  if (Deno.permissions.querySync({ name: "ffi" }).state !== "granted") missing.push("--allow-ffi");
  if (Deno.permissions.querySync({ name: "env", variable: envVar }).state !== "granted") missing.push("--allow-env");
  if (missing.length === 0) {
    readable.add(envVar);
    return;
  }
  const why = [
    missing.includes("--allow-ffi") ? "--allow-ffi to open OpenCL and Embree" : "",
    missing.includes("--allow-env") ? `--allow-env to read ${envVar} and memlife's other variables` : "",
  ].filter(Boolean).join(", and ");
  const narrower = missing.includes("--allow-env")
    ? " (--allow-env=OPENCL_LIBRARY,EMBREE_LIBRARY,MEMLIFE_OPENCL_PLATFORM,MEMLIFE_OPENCL_DEVICE is enough)"
    : "";
  throw new Deno.errors.NotCapable(
    `memlife needs Deno's ${missing.join(" and ")} permission${missing.length > 1 ? "s" : ""} (${why}): ` +
      `run \`deno run ${missing.join(" ")} main.ts\`${narrower}` +
      (missing.includes("--allow-ffi") ? " (--allow-ffi limited to paths is not enough: libraries open by name)" : ""),
  );
}

/** This platform as the prebuilt library's folders name it: `linux-x64`, `linux-arm64`, … (Node's names). */
function platform(): string {
  const arch = Deno.build.arch === "x86_64" ? "x64" : Deno.build.arch === "aarch64" ? "arm64" : Deno.build.arch;
  return `${Deno.build.os}-${arch}`;
}

/**
 * Where Deno's native ledger would be: null in a Worker (ffi/native-ledger.ts says why), and under
 * `deno test` or `deno bench`, whose files may run at once as isolates of one process
 * (`--parallel`): each took over the library's process-wide relay and ledger in turn, and the
 * others' callbacks went astray (SIGSEGV, hangs; test/test-runners.spec.ts).
 */
function ledgerPath(): string | null {
  return inWorker || underRunner ? null : nativeLedgerPath(platform());
}

/** The prebuilt library (ledger and event relay), where it is and this is not a Worker. */
const nativeLibrary = nativeLibraryOnce(open, ledgerPath);
/** The core keeps its count of awaited callbacks here, for the relay (Backend.callbacksAwaited). */
const callbacksAwaited = new Int32Array(new ArrayBuffer(4));
// Only `burst` callbacks (SVM frees) go through the event relay here. For the others, on an H100,
// a destructor reached an awaiting JS thread in 24-34 us through the relay, whichever thread asked
// Deno to run `take`, and in 10-16 us through Deno's own callback (bench/parts.ts --part=await);
// back-to-back releases took the same time either way, or longer through the relay (2026-11-28,
// test/device/results/event-relay-several-ab-h100-2026-11-28.txt: all of them, 5.6-6.7 us a
// buffer against 4.1-4.8, and only while the program awaited several, as Node's relay does, 5.0-6.7
// against 4.6-5.0). So for those a driver thread waits for each of its calls, as Deno makes it.
const relayed = relayedCallbacks(nativeLibrary, plainCallback, fromAddress, "plain", callbacksAwaited);
const callback = relayed.callback;
/** For tests and the bench: how the relay delivered (null where there is no relay). */
export const eventRelayCounts = relayed.counts;
/**
 * Tests only: ticketed monitor calls spin (the waiting thread, the relay thread) from `from` CPUs
 * on (8 by default, ffi/prebuilt/memlife-ledger.c), so that the spinning path runs on a machine
 * with fewer. Call it while no such call waits; nothing where the library is absent.
 */
export function spinFrom(from: number): void {
  nativeLibrary()?.symbols.ledger_spin_from(from);
}

/**
 * Whether a forwarded monitor call from a TBB worker waits on memlife's ticket (through the event
 * relay) or in Deno's own thread-safe callback: the ticket only below 4 CPUs (the affinity mask,
 * which `navigator.hardwareConcurrency` counts). On this repository's 2-vCPU VM the ticket made a
 * call 79-200 us against 413-617 in Deno's callback. With more CPUs Deno's callback was as fast or
 * faster: on the H100 host (taskset) 24-28 against 47-59 us with 4 CPUs, 18-36 against 32-34 with
 * 8, 21-29 against 17-26 with 16 (the ticket's spins on); on the H200 host, 16 CPUs, 100k
 * triangles, 81-95 against 99-241 us, faster in 7 rounds of 8
 * (test/device/results/deno-monitor-ticket-ab-h200-2026-11-29.txt). The ticket's spins (from 8
 * CPUs, ffi/prebuilt/memlife-ledger.c) therefore run only where a test asks for them (`spinFrom`).
 */
export const monitorTicketed: boolean = typeof navigator === "undefined" ||
  !(navigator.hardwareConcurrency >= 4);

/** Made on first use: this module must load where there is no `Deno` (src/backend.ts). */
let lock: Backend["exclusive"] | undefined;
let word: (() => Int32Array) | undefined;

export const backend: Backend = {
  runtime: "deno",
  inWorker,
  callbacksAwaited,
  requirePermissions,
  open,
  callback,
  pointerOf,
  address,
  fromAddress,
  readPointer: (slots, index) => fromAddress(slots[index]),
  writePointer(slots, index, pointer) {
    slots[index] = address(pointer);
  },
  arrayBuffer,
  readCString,
  // Workers keep a JS ledger (ffi/native-ledger.ts says why). Ticketed on a machine of few CPUs: a
  // TBB worker waits for its monitor call on memlife's ticket, not in Deno's callback
  // (ffi/prebuilt/memlife-ledger.c, `monitorTicketed`).
  memoryLedger: ledgerMaker(nativeLibrary, callback, monitorTicketed),
  // Through node:timers' Timeout itself: Deno.refTimer on its id leaves the Timeout's own count,
  // which holds the loop, as it was (a program whose hold was unref'd so never ended).
  unrefTimer: (timer) => holdWith(timer, false),
  refTimer: (timer) => holdWith(timer, true),
  exclusive: (fn) => (lock ??= processLock(open, Deno.build.os))(fn),
  processWord: () => (word ??= processWord(open, Deno.build.os, backend, backend.exclusive))(),
};
