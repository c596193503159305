/**
 * The Bun backend, on `bun:ffi`.
 *
 * - Synchronous bindings are the raw `bun:ffi` functions, with no JS wrapper: Bun passes typed
 *   arrays as pointers and encodes JS strings for `cstring` arguments itself, so the hot paths
 *   (clCreateBuffer, clReleaseMemObject) cost what a plain `dlopen` costs. Except the `reentrant`
 *   ones in `symbols` (`unguarded` keeps them plain): they go through bun-relay.c's `defer_call`,
 *   and the `event` callbacks made on the JS thread inside them run as the call returns, from JS,
 *   instead of entering a JSCallback inside it (45 ns less a destructor: bench/parts.ts "hostptr").
 * - Bun has no nonblocking FFI call. `async` bindings hand the call to a C thread pool
 *   (ffi/bun-relay.c, compiled at run time by Bun's TinyCC), which reports completion through a
 *   threadsafe JSCallback.
 * - Callbacks go through C trampolines (same file) that call a plain JSCallback when native code
 *   calls on the JS thread, and a threadsafe one otherwise: a plain JSCallback hangs the process
 *   when called from another thread, and a threadsafe one runs later, loses its return value and
 *   costs 15 times as much even on the JS thread (README, "Measured facts behind the code").
 *   `event` callbacks from another thread are queued and the caller goes on; `sync` callbacks park
 *   the foreign thread until JS has answered.
 */
import { cc, CFunction, CString, dlopen, FFIType, JSCallback, ptr, read, toArrayBuffer } from "bun:ffi";
import type { FFIFunction, FFITypeOrString, Pointer as BunPointer } from "bun:ffi";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { relaySources } from "./bun-relay-sources.ts";
import { isMainThread } from "node:worker_threads";
import { AsyncQueue } from "./async-queue.ts";
import { Deferral, deferringFits } from "./deferred.ts";
import { BackendError } from "./errors.ts";
import { keepLoader, loaderReason } from "./keep-loaded.ts";
import { processLock, processWord } from "./process-lock.ts";
import { pointable } from "./views.ts";
import { ownClearInterval, ownSetInterval, useTimers } from "./own-timers.ts";
import { sleepTimers } from "./sleep-timers.ts";
import { type LedgerCalls, nativeLedger } from "./native-ledger.ts";
import type {
  Backend,
  Callback,
  CallbackDef,
  MemoryLedger,
  NativeFunction,
  NativeLibrary,
  NativeType,
  OpenOptions,
  Pointer,
  SymbolDef,
  SymbolTable,
} from "./types.ts";

/** How every message of this backend starts. */
const PREFIX = "memlife: ";
// Fakes of the global timers installed before memlife loaded: Bun's real ones are native code, and
// its node:timers calls the globals, so memlife makes its timers of Bun.sleep (ffi/sleep-timers.ts).
if (!Function.prototype.toString.call(globalThis.setInterval).includes("[native code]")) {
  useTimers(sleepTimers(Bun.sleep, () => Bun.nanoseconds() / 1e6));
}

// ---------------------------------------------------------------------------- type mapping

/**
 * `*_fast` 64-bit types come back as a number when it is a safe integer, else a bigint, which is
 * the contract's convention; as arguments they take both. `buffer` and `fn` are plain pointers:
 * Bun accepts a TypedArray or DataView for a `ptr` argument (no copy) and a callback is its
 * pointer number. Bun's own `cstring` argument type encodes a JS string as UTF-8 with a NUL for
 * the duration of the call, so no wrapper is needed for it either.
 */
const typeMap: Record<NativeType, FFITypeOrString> = {
  void: "void",
  bool: "bool",
  i32: "i32",
  u32: "u32",
  i64: FFIType.i64_fast,
  u64: FFIType.u64_fast,
  isize: FFIType.i64_fast,
  usize: FFIType.u64_fast,
  id: FFIType.u64_fast,
  f32: "f32",
  f64: "f64",
  ptr: "ptr",
  buffer: "ptr",
  cstring: "cstring",
  fn: "ptr",
};

function bunFunction(def: SymbolDef): FFIFunction {
  return { args: def.args.map((t) => typeMap[t]), returns: typeMap[def.returns] };
}

// ---------------------------------------------------------------------------- native helpers

/** Must match KIND_* in bun-relay.c: how C cleans up a narrow value held in a 64-bit register. */
const KIND_U64 = 0;
const KIND_I32 = 1;
const KIND_U32 = 2;
const KIND_BOOL = 3;
const KIND_VOID = 4;
const MODE_SYNC = 0;
const MODE_EVENT = 1;
/** A Worker's `sync` slot whose foreign calls JS takes as it polls (MODE_KEPT in bun-relay.c). */
const MODE_KEPT = 2;
/** Must match MODE_DEFERRABLE in bun-relay.c. */
const MODE_DEFERRABLE = 0x100;

/** Must match RELAY_ARGS, RELAY_SLOTS in bun-relay.c and the 9 arguments of async_submit. */
const RELAY_ARGS = 6;
const RELAY_SLOTS = 64;
const ASYNC_ARGS = 9;

function kindOf(t: NativeType, where: string): number {
  switch (t) {
    case "i32":
      return KIND_I32;
    case "u32":
      return KIND_U32;
    case "bool":
      return KIND_BOOL;
    case "void":
      return KIND_VOID;
    case "f32":
    case "f64":
      // Floating-point values travel in other registers than the generic word-sized forwarding
      // in bun-relay.c uses; no memlife signature has one.
      throw new TypeError(`${PREFIX}${where}: floating-point values are not supported`);
    default:
      return KIND_U64;
  }
}

const helperSymbols = {
  memlife_init: { args: ["ptr", "i32"], returns: "void" },
  async_submit: {
    args: ["ptr", "u32", "u64", "u64", "u64", "u64", "u64", "u64", "u64", "u64", "u64"],
    returns: "i32",
  },
  async_threads: { args: [], returns: "i32" },
  async_take: { args: ["ptr", "i32"], returns: "i32" },
  relay_slot_init: { args: ["i32", "i32", "ptr", "ptr", "i32", "u32", "i32"], returns: "ptr" },
  relay_answer: { args: ["ptr", "u64"], returns: "void" },
  relay_take: { args: ["ptr", "i32"], returns: "i32" },
  relay_count: { args: ["i32"], returns: "f64" },
  relay_spin_from: { args: ["i32"], returns: "void" },
  defer_call: { args: ["ptr", "u64", "u64", "u64", "u64", "u64"], returns: "u64" },
  deferred_memory: { args: ["i32"], returns: "ptr" },
  ledger_init: { args: ["ptr"], returns: "ptr" },
  ledger_reset: { args: ["u32"], returns: "i32" },
  ledger_set_forward: { args: ["u32", "i32"], returns: "void" },
  ledger_set_budget: { args: ["u32", "i32", "f64"], returns: "void" },
  ledger_apply: { args: ["u32", "f64", "i32", "i32"], returns: "i32" },
  ledger_read: { args: ["u32", "ptr"], returns: "void" },
} as const satisfies Record<string, FFIFunction>;

/** bun-relay.c as JS sees it (bun-types cannot infer these from the table above). */
/** bun-relay.c's functions, and the ledger.c it includes (whose `ledger_init` takes a relay trampoline). */
interface Helpers extends LedgerCalls {
  memlife_init(done: number | null, cpus: number): void;
  /** The symbol's address is all we use: each async binding types its own CFunction over it. */
  async_submit: { readonly ptr: number };
  async_threads(): number;
  async_take(out: Uint32Array, max: number): number;
  relay_slot_init(
    slot: number,
    mode: number,
    direct: number | null,
    notify: number | null,
    nargs: number,
    kinds: number,
    retKind: number,
  ): number | null;
  relay_answer(request: number, word: number): void;
  relay_take(out: Uint32Array, max: number): number;
  relay_count(which: number): number;
  relay_spin_from(from: number): void;
  deferred_memory(which: number): number;
  /** The symbol's address is all we use: each deferring binding types its own CFunction over it. */
  defer_call: { readonly ptr: number };
}

interface PendingCall {
  resolve(value: unknown): void;
  returns: NativeType;
  /** The call's arguments, so that buffers stay alive (and unmoved) until the call returns. */
  keep: unknown[];
}

const pending = new Map<number, PendingCall>();
/**
 * The relay pool grows by a thread for each call it cannot place (a fixed small pool would
 * deadlock calls that wait on each other): this bounds the threads, and the chance that
 * pthread_create fails and a release is lost, while staying far above what Deno (32 blocking
 * threads) and Node (4 libuv threads) run at once.
 */
const asyncQueue = new AsyncQueue(256);
let nextCallId = 1;
/** memlife's `async` calls running now. */
let asyncInFlight = 0;

/**
 * A threadsafe JSCallback does not keep Bun's event loop alive: with nothing else to do, the
 * process exits (or an `await` at top level ends it) before a queued completion runs. A ref'd
 * timer is held while async calls are in flight.
 */
let loopHold: ReturnType<typeof setInterval> | undefined;

/**
 * TinyCC reads its sources from disk: ffi/bun-relay.c beside this module, where it is (the
 * repository, an installed package), else (a `bun build` bundle, whose output has no ffi/*.c beside
 * it, or a `bun build --compile` binary, whose files are in Bun's embedded file system, which TinyCC
 * cannot read: "tcc: error: file '/$bunfs/root/bun-relay.c' not found") the copy embedded in the
 * code, written into a private temporary folder for the compile and removed after it.
 */
function compileRelay(): ReturnType<typeof cc> {
  // No URL at all in a CommonJS bundle of esbuild's (see ffi/native-ledger.ts): the embedded copy.
  const base: unknown = import.meta.url;
  const url = typeof base === "string" ? new URL("./bun-relay.c", base) : null;
  const beside = url?.protocol === "file:" ? fileURLToPath(url) : null;
  if (beside !== null && !beside.startsWith("/$bunfs/") && existsSync(beside)) {
    return cc({ source: beside, symbols: helperSymbols });
  }
  const dir = mkdtempSync(join(tmpdir(), "memlife-bun-"));
  try {
    for (const [name, text] of Object.entries(relaySources)) writeFileSync(join(dir, name), text, { mode: 0o600 });
    return cc({ source: join(dir, "bun-relay.c"), symbols: helperSymbols });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Everything that must never be collected: native code may call these pointers until exit. */
const immortal: unknown[] = [];

let helpers: Helpers | undefined;

/**
 * In a Worker, async completions are polled (see async_take in bun-relay.c): a threadsafe
 * JSCallback that a pool thread calls after the Worker was terminated crashes the process.
 */
const polled = !isMainThread;
/** How often a Worker looks for completions while async calls are in flight. */
const POLL_MS = 1;
const taken = new Uint32Array(3 * 64);

/** Per MODE_KEPT slot: answers one request the slot kept (see takeCompletions). */
const keptAnswer: ((request: number) => void)[] = [];
const keptTaken = new Uint32Array(4 * 16);

function takeCompletions(): void {
  const h = helpers!;
  let n: number;
  // Requests first: a kept call comes from the thread of a call in flight, which completes only
  // once it was answered.
  do {
    n = h.relay_take(keptTaken, 16);
    for (let i = 0; i < n; i++) {
      // Two 64-bit words each, read as 32-bit halves (little-endian): the slot, the request.
      keptAnswer[keptTaken[4 * i]](keptTaken[4 * i + 3] * TWO32 + keptTaken[4 * i + 2]);
    }
  } while (n === 16);
  do {
    n = h.async_take(taken, 64);
    for (let i = 0; i < n; i++) onAsyncDone(taken[3 * i], taken[3 * i + 1], taken[3 * i + 2]);
  } while (n === 64);
}

/** CPUs this process may run on (Bun counts its affinity mask). */
const cpus = navigator.hardwareConcurrency | 0;
/** Must match RELAY_SPARE_CPUS in bun-relay.c: from this many CPUs a parked thread spins a while. */
const RELAY_SPARE_CPUS = 8;
/**
 * Whether a driver thread's non-burst `event` call (a destructor, an event status) waits, parked,
 * until JS ran it, as Deno's own callbacks make it wait, instead of going on at once: where a
 * parked thread spins rather than sleeps. On the H100 host (16 CPUs) a buffer released back to
 * back with a destructor callback took 3.1-3.3 us so, against 6.4 us with the call handed over;
 * awaited one at a time the same 19-20 us (test/device/results/bun-event-batch-ab-h100-2026-11-28.txt):
 * NVIDIA's driver threads, parked in the callback, leave the program's creates and releases
 * uncontended. With fewer CPUs, a parked thread sleeps and each call costs a wake-up (47 us on a
 * 2-core VM, where a driver calling back from one thread then took 45 us a buffer, not 1.2).
 */
export const eventCallersWait = cpus >= RELAY_SPARE_CPUS;

/**
 * Compiled on first use, on the thread that becomes "the JS thread" for the relays. A failure is
 * memlife's, not that of the library being opened: `whatever` tells `openLibrary` not to try the
 * next path.
 */
function native(): Helpers {
  if (helpers) return helpers;
  let lib: ReturnType<typeof cc>;
  try {
    lib = compileRelay();
  } catch (error) {
    throw new BackendError(
      `memlife's C for Bun (ffi/bun-relay.c) did not compile with Bun's TinyCC: ${(error as Error)?.message ?? error}`,
      { cause: error, whatever: true },
    );
  }
  immortal.push(lib);
  const h = lib.symbols as unknown as Helpers;
  // With RELAY_SPARE_CPUS or more, a foreign thread awaits its answer spinning for a while (ffi/bun-relay.c).
  if (polled) {
    h.memlife_init(null, cpus);
  } else {
    const done = new JSCallback(onAsyncDone, {
      args: ["u32", "u32", "u32"],
      returns: "void",
      threadsafe: true,
    });
    immortal.push(done);
    h.memlife_init(done.ptr, cpus);
    loopHold = ownSetInterval(() => {}, 0x7fffffff);
    loopHold.unref();
  }
  helpers = h;
  return h;
}

/** An async call started: hold the event loop (and, in a Worker, poll) until it completed. */
function started(): void {
  if (asyncInFlight++ !== 0) return;
  if (polled) loopHold = ownSetInterval(takeCompletions, POLL_MS);
  else loopHold!.ref();
}

function finished(): void {
  if (--asyncInFlight !== 0) return;
  if (polled) {
    ownClearInterval(loopHold);
    loopHold = undefined;
  } else loopHold!.unref();
}

const TWO32 = 2 ** 32;

/** The native function returned a word, in two 32-bit halves: read it as the declared type. */
function decode(t: NativeType, lo: number, hi: number): unknown {
  switch (t) {
    case "void":
      return undefined;
    case "bool":
      return (lo & 0xff) !== 0;
    case "i32":
      return lo | 0;
    case "u32":
      return lo >>> 0;
    case "ptr":
    case "buffer":
    case "fn":
    case "cstring":
      // User-space addresses fit in 53 bits on x86-64 and AArch64.
      return lo === 0 && hi === 0 ? null : hi * TWO32 + lo;
    case "i64":
    case "isize":
      if (hi >= 0x80000000) {
        const v = BigInt.asIntN(64, (BigInt(hi) << 32n) | BigInt(lo));
        return v >= -9007199254740991n ? Number(v) : v;
      }
      return unsigned64(lo, hi);
    default:
      return unsigned64(lo, hi);
  }
}

function unsigned64(lo: number, hi: number): number | bigint {
  return hi < 0x200000 ? hi * TWO32 + lo : (BigInt(hi) << 32n) | BigInt(lo);
}

function onAsyncDone(id: number, lo: number, hi: number): void {
  const call = pending.get(id);
  if (!call) return;
  pending.delete(id);
  finished();
  call.resolve(decode(call.returns, lo, hi));
}

const encoder = new TextEncoder();

function bindAsync(name: string, def: SymbolDef, fn: NativeFunction): (...args: unknown[]) => Promise<unknown> {
  if (def.args.length > ASYNC_ARGS) {
    throw new TypeError(`${PREFIX}${name}: async calls take at most ${ASYNC_ARGS} arguments`);
  }
  for (const t of def.args) kindOf(t, name);
  kindOf(def.returns, name);
  const h = native();
  // The pool's entry point, typed for this symbol so that Bun converts each argument as the
  // symbol declares it; async_submit forwards the raw words to the function unchanged.
  const args: FFITypeOrString[] = ["ptr", "u32"];
  for (let i = 0; i < ASYNC_ARGS; i++) {
    const t = def.args[i];
    // A `cstring` is encoded here and kept, since Bun's temporary copy dies when submit returns.
    args.push(t === undefined ? "u64" : t === "cstring" ? "ptr" : typeMap[t]);
  }
  const submit = CFunction({ ptr: h.async_submit.ptr as BunPointer, args, returns: "i32" });
  immortal.push(submit);
  // Bun's bound functions carry the native address they call.
  const target = (fn as unknown as { ptr: number }).ptr;
  const arity = def.args.length;
  const types = def.args;

  const start = (given: unknown[]): Promise<unknown> => {
    const words: unknown[] = new Array(ASYNC_ARGS).fill(0n);
    for (let i = 0; i < arity; i++) {
      let v = given[i];
      if (types[i] === "cstring" && typeof v === "string") {
        v = encoder.encode(v + "\0");
      } else if (ArrayBuffer.isView(v)) {
        // A typed array without its own ArrayBuffer may be moved by the GC; this pins it.
        void v.buffer;
      }
      words[i] = v === undefined ? null : v;
    }
    const id = nextCallId;
    nextCallId = nextCallId === 0xffffffff ? 1 : nextCallId + 1;
    let err: number;
    try {
      err = submit(target, id, ...words) as number;
    } catch (e) {
      return Promise.reject(e);
    }
    if (err !== 0) {
      return Promise.reject(new BackendError(`${PREFIX}${name}: cannot start a thread (errno ${err})`, { errno: err }));
    }
    const { promise, resolve } = Promise.withResolvers<unknown>();
    pending.set(id, { resolve, returns: def.returns, keep: words });
    started();
    return promise;
  };
  return (...given: unknown[]): Promise<unknown> => asyncQueue.run(() => start(given));
}

// ---------------------------------------------------------------------------- open

const keepLoaded = keepLoader(open, readCString, process.platform);
const whyNotLoaded = loaderReason(open, readCString, process.platform);

function open<T extends SymbolTable>(path: string, table: T, options?: OpenOptions): NativeLibrary<T> {
  if (options?.keepLoaded) keepLoaded(path);
  const all: Record<string, FFIFunction> = {};
  const required: Record<string, FFIFunction> = {};
  const optional: string[] = [];
  for (const [name, def] of Object.entries(table)) {
    all[name] = bunFunction(def);
    if (def.optional) optional.push(name);
    else required[name] = all[name];
  }

  const symbols: Record<string, NativeFunction | undefined> = {};
  const libs: unknown[] = [];
  try {
    const lib = dlopen(path, all);
    libs.push(lib);
    Object.assign(symbols, lib.symbols);
  } catch (first) {
    // Bun refuses the whole table when one symbol is missing. Unless the library itself failed
    // to open, bind what is required (its error names the missing symbol), then probe each
    // optional symbol alone.
    if ((first as { code?: string }).code === "ERR_DLOPEN_FAILED") {
      // Bun's message is its retry's in the working directory: the loader's own reason says more.
      const reason = whyNotLoaded(path);
      throw reason === null ? first : new BackendError(`Failed to open library "${path}": ${reason}`, { cause: first });
    }
    if (optional.length === 0) throw first;
    if (Object.keys(required).length > 0) {
      const lib = dlopen(path, required);
      libs.push(lib);
      Object.assign(symbols, lib.symbols);
    }
    for (const name of optional) {
      try {
        const one = dlopen(path, { [name]: all[name] });
        libs.push(one);
        symbols[name] = one.symbols[name];
      } catch {
        symbols[name] = undefined;
      }
    }
  }
  // Libraries stay open for the life of the process: their callbacks may run until exit.
  immortal.push(...libs);

  const asyncBindings: Record<string, (...args: unknown[]) => Promise<unknown>> = {};
  for (const [name, def] of Object.entries(table)) {
    const fn = symbols[name];
    if (def.blocking && fn) asyncBindings[name] = bindAsync(name, def, fn);
  }

  // A JSCallback may run inside any bun:ffi call: nothing to guard. But a symbol that may call
  // back on this thread goes through defer_call, which runs `event` callbacks after the call, not
  // inside it (bun-relay.c says why); `unguarded` keeps the plain function, for calls that cannot
  // call back.
  const guarded: Record<string, NativeFunction | undefined> = { ...symbols };
  for (const [name, def] of Object.entries(table)) {
    const fn = symbols[name];
    if (def.reentrant && fn && deferringFits(def)) guarded[name] = bindDeferring(def, fn);
  }

  return {
    path,
    symbols: guarded as NativeLibrary<T>["symbols"],
    unguarded: symbols as NativeLibrary<T>["unguarded"],
    async: asyncBindings as NativeLibrary<T>["async"],
  };
}

// ---------------------------------------------------------------------------- deferred callbacks

let deferralMade: Deferral | undefined;

/** bun-relay.c's deferred calls (ffi/deferred.c): made with the relay. */
function deferral(): Deferral {
  if (deferralMade !== undefined) return deferralMade;
  const h = native();
  const state = new Int32Array(toArrayBuffer(h.deferred_memory(0) as BunPointer, 0, 12));
  deferralMade = new Deferral(
    state,
    (byteLength) => new Uint32Array(toArrayBuffer(h.deferred_memory(1) as BunPointer, 0, byteLength)),
    // As a JSCallback gets a `ptr`: a number, null for NULL.
    (low, high) => low === 0 && high === 0 ? null : high * 0x100000000 + low,
  );
  return deferralMade;
}

/** `fn` called through defer_call, then the `event` callbacks it queued run, oldest first. */
function bindDeferring(def: SymbolDef, fn: NativeFunction): NativeFunction {
  const h = native();
  const call = CFunction({
    ptr: h.defer_call.ptr as BunPointer,
    args: ["ptr", ...def.args.map((t) => typeMap[t])],
    returns: typeMap[def.returns],
  }) as unknown as (...args: unknown[]) => unknown;
  immortal.push(call);
  // Bun's bound functions carry the native address they call.
  return deferral().bind(call, (fn as unknown as { ptr: number }).ptr, def.args.length);
}

// ---------------------------------------------------------------------------- callbacks

let slotsUsed = 0;

/** Read argument i of a parked request (normalised to 64 bits by C) as the declared type. */
function readArg(t: NativeType, request: number, i: number): unknown {
  const at = 8 * i;
  switch (t) {
    case "bool":
      return read.u8(request, at) !== 0;
    case "i32":
      return read.i32(request, at);
    case "u32":
      return read.u32(request, at);
    case "ptr":
    case "buffer":
    case "cstring":
    case "fn": {
      const p = read.ptr(request, at);
      return p === 0 ? null : p;
    }
    case "i64":
    case "isize": {
      const v = read.i64(request, at);
      return Number.isSafeInteger(Number(v)) ? Number(v) : v;
    }
    default: {
      const v = read.u64(request, at);
      return v <= 9007199254740991n ? Number(v) : v;
    }
  }
}

/** The answer JS gave, as the word C hands back; the same conversions Bun applies to a plain JSCallback. */
function encodeAnswer(t: CallbackDef["returns"], value: unknown): number {
  switch (t) {
    case "bool":
      return value ? 1 : 0;
    case "i32":
      return Number(value) | 0;
    case "u32":
      return Number(value) >>> 0;
    default:
      return 0;
  }
}

function callback(def: CallbackDef, fn: (...args: never[]) => unknown): Callback {
  const where = `callback(${def.args.join(", ")}) -> ${def.returns}`;
  if (def.args.length > RELAY_ARGS) {
    throw new TypeError(`${PREFIX}${where}: at most ${RELAY_ARGS} arguments`);
  }
  if (slotsUsed === RELAY_SLOTS) {
    throw new RangeError(`${PREFIX}all ${RELAY_SLOTS} callback trampolines are in use`);
  }
  let kinds = 0;
  def.args.forEach((t, i) => {
    kinds |= kindOf(t, where) << (4 * i);
  });
  const retKind = kindOf(def.returns, where);
  const h = native();
  const userFn = fn as (...args: unknown[]) => unknown;
  const args = def.args.map((t) => typeMap[t]);
  const returns = typeMap[def.returns];

  // On the JS thread: a plain JSCallback, synchronous (inside the native call that triggered
  // it, e.g. PoCL's clReleaseMemObject), with its return value.
  const direct = new JSCallback(userFn, { args, returns });
  let notify: JSCallback | undefined;
  let mode: number;
  if (def.delivery === "event" && (def.burst === true || !eventCallersWait)) {
    // From another thread: queued on the JS thread with copies of the arguments; the native
    // caller goes on at once.
    mode = MODE_EVENT;
    notify = new JSCallback(userFn, { args, returns: "void", threadsafe: true });
  } else {
    // From another thread: the caller is parked in C on a request holding its arguments (which
    // therefore stay valid, e.g. Embree's error string), until relay_answer. Also an `event`
    // call where `eventCallersWait`, whose answer is nothing.
    const types = def.args;
    const answer = h.relay_answer;
    const answerRequest = (request: number) => {
      let word = 0;
      try {
        const values = types.map((t, i) => readArg(t, request, i));
        word = encodeAnswer(def.returns, userFn(...values));
      } finally {
        // Whatever happened, the native thread must be released.
        answer(request, word);
      }
    };
    if (polled && def.delivery === "sync" && def.onAsyncThreads === true) {
      // A Worker: taken where its async completions are (takeCompletions), never through a
      // threadsafe JSCallback, which crashed Bun when called after the Worker was terminated.
      mode = MODE_KEPT;
      notify = undefined;
      keptAnswer[slotsUsed] = answerRequest;
    } else {
      mode = MODE_SYNC;
      notify = new JSCallback(answerRequest, { args: ["ptr"], returns: "void", threadsafe: true });
    }
  }
  const slot = slotsUsed++;
  if (def.delivery === "event") {
    mode |= MODE_DEFERRABLE;
    deferral().slot(slot, def.args, userFn);
  }
  const trampoline = h.relay_slot_init(slot, mode, direct.ptr, notify?.ptr ?? null, def.args.length, kinds, retKind);
  if (!trampoline) throw new BackendError(`${PREFIX}${where}: relay_slot_init refused the slot`);
  immortal.push(direct, notify);
  return trampoline as unknown as Callback;
}

// ---------------------------------------------------------------------------- memory ledger

let ledgerMade = false;

/**
 * The ledger of bun-relay.c: calls of an account that does not forward are settled in C, on the
 * thread that makes them (a TBB worker no longer waits for the JS thread per allocation);
 * forwarded ones go through a `sync` relay slot to `forward`. One per process: it is
 * the Embree monitor's.
 */
function memoryLedger(def: CallbackDef, forward: (id: number, bytes: number, post: boolean) => boolean): MemoryLedger {
  if (ledgerMade) throw new RangeError(`${PREFIX}the memory ledger exists already (one per process)`);
  const ledger = nativeLedger(native(), { callback }, def, forward);
  ledgerMade = true;
  return ledger;
}

// ---------------------------------------------------------------------------- memory

function pointerOf(view: ArrayBufferView): Pointer {
  // Bun's ptr() of a typed array that has no ArrayBuffer of its own yet points at storage the GC
  // may move; asking for the buffer gives it one.
  pointable(view, PREFIX);
  return ptr(view as DataView) as unknown as Pointer;
}

function address(pointer: Pointer | null): bigint {
  return pointer === null ? 0n : BigInt(pointer as unknown as number);
}

function fromAddress(value: bigint): Pointer | null {
  return value === 0n ? null : (Number(value) as unknown as Pointer);
}

// Word views of the last BigUint64Array read and the last written: the core reuses one out-argument
// for every command's event and one scratch list for pointers, so each keeps hitting. Bun runs on
// little-endian machines only (x64, arm64): the low word comes first.
let readSlots: BigUint64Array | undefined;
let readWords: Uint32Array = new Uint32Array(0);
let writeSlots: BigUint64Array | undefined;
let writeWords: Uint32Array = new Uint32Array(0);

function wordsOf(slots: BigUint64Array): Uint32Array {
  return new Uint32Array(slots.buffer, slots.byteOffset, slots.length * 2);
}

function readPointer(slots: BigUint64Array, index: number): Pointer | null {
  if (slots !== readSlots) {
    readWords = wordsOf(slots);
    readSlots = slots;
  }
  // Exact: user-space addresses stay far below 2^53.
  const value = readWords[2 * index] + readWords[2 * index + 1] * 0x1_0000_0000;
  return value === 0 ? null : (value as unknown as Pointer);
}

function writePointer(slots: BigUint64Array, index: number, pointer: Pointer | null): void {
  if (slots !== writeSlots) {
    writeWords = wordsOf(slots);
    writeSlots = slots;
  }
  const value = pointer === null ? 0 : (pointer as unknown as number);
  const low = value >>> 0; // ToUint32: the value modulo 2^32, exact for any integer below 2^53
  writeWords[2 * index] = low;
  writeWords[2 * index + 1] = (value - low) / 0x1_0000_0000;
}

function arrayBuffer(pointer: Pointer, byteLength: number): ArrayBuffer {
  // toArrayBuffer refuses a length of 0 (and without a length would read up to a NUL).
  if (byteLength === 0) return new ArrayBuffer(0);
  // Past 4 GiB Bun's toArrayBuffer throws "Out of memory", which says nothing of the real limit.
  if (byteLength > 2 ** 32) {
    throw new RangeError(
      `${PREFIX}arrayBuffer: Bun views at most 4 GiB of native memory as one ArrayBuffer, asked for ${byteLength} bytes (map or copy a smaller range)`,
    );
  }
  return toArrayBuffer(pointer as unknown as BunPointer, 0, byteLength);
}

function readCString(pointer: Pointer): string {
  return new CString(pointer as unknown as BunPointer);
}

export const backend: Backend = {
  runtime: "bun",
  inWorker: !isMainThread,
  // Nothing reads it here: whether a driver thread waits for JS depends on the CPUs (eventCallersWait).
  callbacksAwaited: new Int32Array(new ArrayBuffer(4)),
  open,
  callback,
  memoryLedger,
  pointerOf,
  address,
  fromAddress,
  readPointer,
  writePointer,
  arrayBuffer,
  readCString,
  unrefTimer: (timer) => (timer as unknown as { unref(): void }).unref(),
  refTimer: (timer) => (timer as unknown as { ref(): void }).ref(),
  exclusive: processLock(open, process.platform),
  processWord: () => word(),
};
const word = processWord(open, process.platform, backend, backend.exclusive);

/**
 * Test and diagnostics only, not on the package's surface (tests import this file): how many
 * callback calls the trampolines answered directly on the JS thread, how many came from other
 * threads, and how many pool threads run async calls.
 */
export function bunRelayStats(): { direct: number; relayed: number; poolThreads: number } {
  const h = native();
  return { direct: h.relay_count(0), relayed: h.relay_count(1), poolThreads: h.async_threads() };
}

/**
 * Tests only: a thread waiting for its answer from JS spins first from `from` CPUs on (8 by
 * default, ffi/bun-relay.c), so that the spinning path runs on a machine with fewer. Call it while
 * no such call waits.
 */
export function spinFrom(from: number): void {
  native().relay_spin_from(from);
}
