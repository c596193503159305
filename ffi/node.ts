/**
 * The Node backend, on koffi 3.
 *
 * koffi 3 represents every pointer as a BigInt (NULL as `null`), so a {@link Pointer} here *is* its
 * address: `address`/`fromAddress` are identities and pointers cross the FFI boundary without any
 * wrapping. Sync bindings are koffi's own functions, returned as they are: no JS layer on the hot
 * paths (clCreateBuffer, clReleaseMemObject). Except the `reentrant` ones in `symbols` where the
 * prebuilt library is (`unguarded` keeps them plain): they go through its `defer_call`, and the
 * relay's `event` callbacks made on the JS thread inside them run as the call returns, not inside
 * it (ffi/deferred.c: 70-100 ns less a destructor).
 *
 * Threads: a registered koffi callback runs synchronously when native code calls it on the JS
 * thread; from any other thread, koffi queues it to the JS thread and blocks the caller until it
 * ran (return value honoured). So the JS thread must never sit in a sync call that waits on such a
 * thread: those calls go through `async`, which runs them on the libuv pool with `fn.async` (4
 * threads unless UV_THREADPOOL_SIZE says otherwise: a fifth blocking call waits for a free one).
 * koffi's relay is unref'ed: a callback native code still owes does not keep Node alive.
 */
import * as koffi from "koffi";
import * as nodeTimers from "node:timers";
import { inspect } from "node:util";
import { takeCoverage } from "node:v8";
import { runInThisContext } from "node:vm";
import { isMainThread } from "node:worker_threads";
import { AsyncQueue } from "./async-queue.ts";
import { laneAsync, ledgerMaker, nativeLedgerPath, nativeLibraryOnce } from "./native-ledger.ts";
import { relayedCallbacks } from "./event-relay.ts";
import { Deferral, deferringFits } from "./deferred.ts";
import { keepLoader } from "./keep-loaded.ts";
import { processLock, processWord } from "./process-lock.ts";
import { pointable } from "./views.ts";
import { holdWith, ownSetImmediate, useTimers } from "./own-timers.ts";
import { libcSymbols } from "./symbols/libc.ts";
import type {
  Backend,
  Callback,
  CallbackDef,
  NativeFunction,
  NativeLibrary,
  NativeType,
  OpenOptions,
  Pointer,
  SymbolTable,
} from "./types.ts";

/** How every message of this backend starts. */
const PREFIX = "memlife: ";
// node:timers, not the globals a program may fake before memlife loads (ffi/own-timers.ts).
useTimers(nodeTimers);

// koffi runs every native call on a stack of its own, and an async call gets only 128 KiB by
// default. rtcCommitScene makes the calling thread join Embree's TBB arena and run build tasks
// there, so give async calls what a plain thread gets (the memory is mmap'ed, committed on use).
// koffi accepts settings only before its first library load: if the program loaded a library
// through koffi before memlife, the defaults stay.
// `max_async_calls` also bounds the calls that native threads make into registered callbacks (each
// borrows an async memory block until JS answered): raise it so that memlife's own calls, capped
// below, leave room for every thread a driver or Embree may have calling back at once.
try {
  koffi.config({ ...koffi.config(), async_stack_size: 8 * 1024 * 1024, max_async_calls: 1024 });
} catch {
  // Too late to change; koffi's defaults apply.
}

/**
 * memlife's own async calls at once: more than the libuv pool runs (4 threads unless
 * UV_THREADPOOL_SIZE says otherwise) gains nothing, and at most a quarter of koffi's limit leaves
 * the rest to callbacks from native threads. The others wait in `asyncQueue`, in call order.
 */
const asyncLimit = Math.max(1, Math.min(64, Math.floor(Number(koffi.config().max_async_calls) / 4)));
const asyncQueue = new AsyncQueue(asyncLimit);

/** The C type koffi should use for each neutral type. */
const typeMap: Readonly<Record<NativeType, string>> = {
  void: "void",
  bool: "bool",
  i32: "int32_t",
  u32: "uint32_t",
  // koffi already returns 64-bit integers as a number when safe, else a BigInt: the contract's rule.
  i64: "int64_t",
  u64: "uint64_t",
  isize: "intptr_t", // koffi knows no ssize_t; intptr_t has its size and signedness
  usize: "size_t",
  id: "size_t",
  f32: "float",
  f64: "double",
  // Opaque handles: koffi passes BigInt/null/number as the address and returns BigInt or null.
  ptr: "void *",
  // A typed array given to a plain `void *` parameter is passed in place: koffi takes the view's
  // own data pointer (byteOffset included) and only copies for `_Out_`/`_Inout_` or typed pointers
  // (e.g. `int *`), so CL_MEM_USE_HOST_PTR and out-parameters see the JS memory itself.
  buffer: "void *",
  cstring: "const char *",
  // koffi.register returns the trampoline's address as a BigInt: a plain pointer argument takes it.
  fn: "void *",
};

function cType(type: NativeType): string {
  const c = typeMap[type];
  if (c === undefined) throw new TypeError(`${PREFIX}unknown native type ${String(type)}`);
  return c;
}

// ---------------------------------------------------------------------------------------------
// Ending the process
// ---------------------------------------------------------------------------------------------

// The process itself: libc is in its global scope, whichever libc it is.
const libc = bind(koffi.load(null), "(the process)", { _exit: libcSymbols._exit, fflush: libcSymbols.fflush });

/**
 * The process itself. A test runner may give the program a `process` of its own: Jest's test
 * environment makes one per test file (its own listeners, the real one's methods), and memlife's
 * exit listener went on that copy, which never hears `exit`: the guard below never ran under Jest
 * (a passing run that ended with commits in flight died of SIGSEGV, exit code 139, in 4 runs of 6).
 * Jest answers `import "node:process"`, `createRequire` and `process.getBuiltinModule` with its
 * copy too; a script run in Node's main context reads the real one.
 */
const realProcess: NodeJS.Process = mainContextProcess() ?? process;

function mainContextProcess(): NodeJS.Process | undefined {
  try {
    const found = runInThisContext("process") as NodeJS.Process | undefined;
    return typeof found?.on === "function" && typeof found.listeners === "function" ? found : undefined;
  } catch {
    return undefined;
  }
}

/**
 * What every copy of this module in the process shares, on the real process: Jest evaluates
 * memlife's modules once per test file in one process (a module registry each), and vitest's
 * vm pools do the same. Only the first copy adds the exit guard (one listener, not one per test
 * file). Which copy owns the prebuilt library, the library itself decides (ffi/native-ledger.ts,
 * `memlife_claim`): the first that opens it.
 */
interface ProcessWide {
  /** A copy opened a library: its own threads (PoCL's compiler and workers, TBB) may be running, and
   * native code may hold callbacks or run async calls (each needs a library first). */
  libraryOpened: boolean;
  /** The exit guard is installed. */
  guarded: boolean;
}
const PROCESS_WIDE = Symbol.for("memlife.node.processWide");
const shared: ProcessWide = ((realProcess as unknown as Record<symbol, ProcessWide | undefined>)[PROCESS_WIDE] ??= {
  libraryOpened: false,
  guarded: false,
});

/**
 * Ending a Node process that used native callbacks needs help, because of what follows the `exit`
 * event (V8 and environment teardown, then C `atexit` handlers):
 * - teardown joins the libuv pool: a pool thread still inside an async call that waits on a thread
 *   waiting for the JS thread (a TBB worker in the memory monitor, a PoCL worker in an SVM-free
 *   callback) never returns, so `process.exit(3)`, an uncaught exception or an unhandled rejection
 *   hang for ever (libuv joins its pool at exit: https://github.com/libuv/libuv/issues/364,
 *   https://github.com/nodejs/node/issues/17872);
 * - a driver thread that calls a registered callback during teardown (a PoCL worker completing an
 *   SVM free right as the program ends) goes through koffi's thread-safe function after Node freed
 *   it, and the process aborts instead of exiting with its own code (no upstream issue found; how
 *   often: README, "Measured facts behind the code");
 * - unloading Embree while TBB workers still run segfaults;
 * - C `atexit` handlers destroy LLVM's statics while PoCL compiles a kernel with it on a worker
 *   thread (it does so at a kernel's first enqueue) or runs one: SIGSEGV in 7 runs of 10 that end
 *   right after an enqueue, with nothing of memlife's in flight (test/fixtures/opencl-exit-running.ts).
 * The backend cannot see which callbacks native code still owes, nor when a driver's threads are
 * idle, so once a library is open it ends the process itself at the end of the `exit` event, with
 * `_exit` and the code Node would have used, after running the `exit` listeners added after this one, printing a fatal exception Node
 * would have printed after the event, and writing V8 coverage (`NODE_V8_COVERAGE`) that teardown
 * would have written. Node's own stdout/stderr writes are synchronous on POSIX for files, pipes
 * and terminals, so they are out already. What is lost is the rest of teardown: `--cpu-prof` and
 * `--heap-prof` files, trace-event flushes, and native `atexit` handlers.
 * Worker threads are left alone: `_exit` there would end the whole process.
 */
function onExit(code: number): void {
  if (!shared.libraryOpened) return;
  const listeners = realProcess.listeners("exit");
  for (let i = listeners.indexOf(onExit) + 1; i < listeners.length; i++) {
    try {
      listeners[i].call(realProcess, code);
    } catch (error) {
      // Node prints an exception thrown by an exit listener, skips the rest, keeps the code.
      printFatal(error);
      break;
    }
  }
  if (fatal !== undefined) printFatal(fatal.error);
  if (process.env.NODE_V8_COVERAGE) takeCoverage();
  const exitCode = realProcess.exitCode;
  const final = exitCode === undefined || exitCode === null ? code : Number(exitCode);
  // Native libraries may have buffered output in C stdio.
  libc.symbols.fflush(null);
  libc.symbols._exit(final);
}

/** Node reports a fatal exception only after the `exit` event: remember it for `onExit`. */
let fatal: { error: unknown } | undefined;
function onFatal(error: unknown, origin: string): void {
  // Handled by the program (which may well go on): not fatal.
  if (realProcess.listenerCount("uncaughtException") > 0) return;
  if (origin === "unhandledRejection" && realProcess.listenerCount("unhandledRejection") > 0) return;
  fatal = { error };
  // The fatal path reaches `exit` synchronously; anything later means Node carried on.
  ownSetImmediate(() => (fatal = undefined)).unref();
}

function printFatal(error: unknown): void {
  let text: string;
  try {
    text = error instanceof Error ? inspect(error) : `Uncaught ${inspect(error)}`;
  } catch (failure) {
    // A Proxy whose traps throw, say: printing it threw, and `_exit` must still come (a commit
    // in flight waits on the JS thread; Node's own teardown would then hang).
    text = `Uncaught exception that could not be printed (${describe(failure)})`;
  }
  realProcess.stderr.write(`${text}\n\nNode.js ${realProcess.version}\n`);
}

function describe(failure: unknown): string {
  try {
    return String(failure);
  } catch {
    return "printing it threw too";
  }
}

if (isMainThread && !shared.guarded) {
  shared.guarded = true;
  realProcess.on("exit", onExit);
  realProcess.on("uncaughtExceptionMonitor", onFatal);
}

// ---------------------------------------------------------------------------------------------
// Libraries
// ---------------------------------------------------------------------------------------------

type KoffiFunction = ReturnType<koffi.LibraryHandle["func"]>;

function bindAsync(native: KoffiFunction): (...args: unknown[]) => Promise<unknown> {
  return (...args: unknown[]) => asyncQueue.run(() => startAsync(native, args));
}

function startAsync(native: KoffiFunction, args: unknown[]): Promise<unknown> {
  return new Promise((resolve, reject) => {
    let running = true;
    // koffi reads the data pointer of each view when the call is queued and keeps no reference
    // to the view: `args` stays reachable through `done` until the native call returned, so
    // nothing it points into can be collected meanwhile.
    const done = (error: unknown, result: unknown): void => {
      if (!running) return;
      running = false;
      args.length = 0;
      if (error) reject(error);
      else resolve(result);
    };
    try {
      // A bad argument makes koffi call `done` with the error before returning; a full queue
      // ("Too many asynchronous calls are running", which asyncQueue keeps from happening)
      // throws without calling it.
      native.async(...args, done);
    } catch (error) {
      done(error, undefined);
    }
  });
}

const keepLoaded = keepLoader(open, (pointer) => koffi.decode.string(pointer), process.platform);

function open<T extends SymbolTable>(path: string, table: T, options?: OpenOptions): NativeLibrary<T> {
  if (options?.keepLoaded) keepLoaded(path);
  const library = bind(koffi.load(path), path, table);
  shared.libraryOpened = true;
  return library;
}

function bind<T extends SymbolTable>(lib: koffi.LibraryHandle, path: string, table: T): NativeLibrary<T> {
  const symbols: Record<string, NativeFunction | undefined> = {};
  const plain: Record<string, NativeFunction | undefined> = {};
  const async: Record<string, ((...args: unknown[]) => Promise<unknown>) | undefined> = {};
  for (const name of Object.keys(table)) {
    const def = table[name];
    let native: KoffiFunction;
    try {
      native = lib.func(name, cType(def.returns), def.args.map(cType));
    } catch (error) {
      if (def.optional && /Cannot find function/.test(String((error as Error)?.message))) {
        symbols[name] = plain[name] = undefined;
        if (def.blocking) async[name] = undefined;
        continue;
      }
      throw error;
    }
    // A symbol that may call back on this thread goes through the library's defer_call: the
    // relay's `event` callbacks it makes run as it returns, not inside it (ffi/deferred.c).
    plain[name] = native;
    const deferring = def.reentrant && deferringFits(def) ? deferral() : null;
    symbols[name] = deferring === null ? native : deferring.bind(
      deferring.call(cType(def.returns), def.args.map(cType)),
      lib.symbol(name, "void"),
      def.args.length,
    );
    if (def.blocking) {
      async[name] = (def.sameThread && laneAsync(nativeLibrary(), path, name, def, { callback: relayed.callback })) ||
        bindAsync(native);
    }
  }
  // A copy: filled by computed keys, the table had gone to dictionary mode, where TurboFan reads
  // each `symbols.clX` of a hot path through a generic LoadIC (3% of a hostPtr "use" buffer under
  // perf; create + release 261 -> 249 ns a buffer). A spread copy is a fast-mode object.
  const bound = { ...symbols };
  // koffi has no fast-call path that a callback could break: what `unguarded` skips is defer_call.
  const unguarded = { ...plain };
  return {
    path,
    symbols: bound as NativeLibrary<T>["symbols"],
    unguarded: unguarded as NativeLibrary<T>["unguarded"],
    async: async as NativeLibrary<T>["async"],
  };
}

// ---------------------------------------------------------------------------------------------
// Callbacks
// ---------------------------------------------------------------------------------------------

/**
 * koffi refuses a return value of the wrong JS type (`undefined` for `bool`, a boolean for `int`)
 * by raising a TypeError into the native frame. Convert as C would instead, the contract's rule
 * (ffi/types.ts, CallbackDef): any falsy value, `undefined` included, is false; integers truncated.
 */
function normalized(def: CallbackDef, fn: (...args: never[]) => unknown): (...args: never[]) => unknown {
  const f = fn as (...args: unknown[]) => unknown;
  switch (def.returns) {
    case "void":
      return fn;
    case "bool":
      return (...args: unknown[]) => Boolean(f(...args));
    case "i32":
      return (...args: unknown[]) => Number(f(...args)) | 0;
    case "u32":
      return (...args: unknown[]) => Number(f(...args)) >>> 0;
  }
}

function plainCallback(def: CallbackDef, fn: (...args: never[]) => unknown): Callback {
  const proto = koffi.proto(cType(def.returns), def.args.map(cType));
  // Registered for the whole process and never unregistered: koffi reuses a freed slot for the
  // next registration, so a native caller holding the old address would run an unrelated
  // callback (no upstream issue found: koffi documents unregister, not the reuse). koffi has 8192
  // slots; memlife uses one per callback kind.
  return koffi.register(normalized(def, fn), koffi.pointer(proto)) as unknown as Callback;
}

// ---------------------------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------------------------

/** The prebuilt library (ledger and event relay), where it is and this is not a Worker. */
const nativeLibrary = nativeLibraryOnce(
  open,
  () => isMainThread ? nativeLedgerPath(`${process.platform}-${process.arch}`) : null,
);
function fromAddress(address: bigint): Pointer | null {
  return address === 0n ? null : (address as unknown as Pointer);
}
/** The deferred calls of the prebuilt library (ffi/deferred.c), with the koffi function that binds its defer_call. */
type NodeDeferral = Deferral & { call(returns: string, args: string[]): (...args: unknown[]) => unknown };
let deferralMade: NodeDeferral | null | undefined;

/** Where the prebuilt library is (not in a Worker): its deferred calls, else null. */
function deferral(): NodeDeferral | null {
  if (deferralMade !== undefined) return deferralMade;
  deferralMade = null;
  const path = isMainThread ? nativeLedgerPath(`${process.platform}-${process.arch}`) : null;
  if (path === null || nativeLibrary() === null) return null;
  const lib = koffi.load(path);
  const memory = lib.func("deferred_memory", "void *", ["int"]);
  const made = new Deferral(
    new Int32Array(koffi.view(memory(0), 12)),
    (byteLength) => new Uint32Array(koffi.view(memory(1), byteLength)),
    // As koffi gives a `void *` here: a bigint, null for NULL.
    (low, high) => low === 0 && high === 0 ? null : BigInt(high * 0x100000000 + low),
  ) as NodeDeferral;
  made.call = (returns, args) => lib.func("defer_call", returns, ["void *", ...args]) as (...a: unknown[]) => unknown;
  deferralMade = made;
  return made;
}
/** The core keeps its count of awaited callbacks here, for the relay (Backend.callbacksAwaited). */
const callbacksAwaited = new Int32Array(new ArrayBuffer(4));
/**
 * `event` callbacks go through the library's relay: a `burst` caller never waits for JS, of others
 * only one does, and none while the program awaits several callbacks.
 */
const relayed = relayedCallbacks(nativeLibrary, plainCallback, fromAddress, "relay", callbacksAwaited, deferral);
const callback = relayed.callback;
/** For tests and the bench: how the relay delivered (null where there is no relay). */
export const eventRelayCounts = relayed.counts;

export const backend: Backend = {
  runtime: "node",
  inWorker: !isMainThread,
  callbacksAwaited,
  open,
  callback,
  pointerOf(view: ArrayBufferView): Pointer {
    pointable(view, PREFIX);
    // The address of the view's first byte (byteOffset included), as koffi passes it to `void *`.
    return koffi.address(view) as unknown as Pointer;
  },
  address(pointer: Pointer | null): bigint {
    return pointer === null ? 0n : (pointer as unknown as bigint);
  },
  fromAddress,
  // Pointers are bigints here: the element itself.
  readPointer: (slots, index) => fromAddress(slots[index]),
  writePointer(slots, index, pointer) {
    slots[index] = pointer === null ? 0n : (pointer as unknown as bigint);
  },
  arrayBuffer(pointer: Pointer, byteLength: number): ArrayBuffer {
    // koffi.view(NULL, n > 0) does not throw: Node asserts and aborts the process.
    if (pointer === null) {
      if (byteLength === 0) return new ArrayBuffer(0);
      throw new TypeError(`${PREFIX}arrayBuffer() of a NULL pointer`);
    }
    // An external ArrayBuffer over the native memory: no copy, no ownership.
    return koffi.view(pointer, byteLength);
  },
  readCString(pointer: Pointer): string {
    return koffi.decode.string(pointer);
  },
  // Workers keep a JS ledger (ffi/native-ledger.ts says why).
  memoryLedger: ledgerMaker(nativeLibrary, callback),
  unrefTimer: (timer) => holdWith(timer, false),
  refTimer: (timer) => holdWith(timer, true),
  exclusive: processLock(open, process.platform),
  processWord: () => word(),
};
const word = processWord(open, process.platform, backend, backend.exclusive);
