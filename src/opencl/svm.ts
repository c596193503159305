/** Shared virtual memory: clSVMAlloc, clSVMFree, and clEnqueueSVMFree with its free callback. */
import type { Pointer } from "../../ffi/types.ts";
import { trampolines } from "../trampolines.ts";
import { backend, inWorker } from "../backend.ts";
import {
  CallbackOutcome,
  defer,
  executorRan,
  finalizerState,
  IdTable,
  owe,
  paid,
  returnedPromise,
  SafetyNet,
  StatusPoll,
} from "../callbacks.ts";
import { OpenCLError, ReleasedError } from "../errors.ts";
import { EventInfo, MemFlags } from "./constants.ts";
import { infoU32, opencl, optionalSymbol } from "./native.ts";
import { OpenCLStatus } from "./status-codes.ts";
import { type Access, accessFlags } from "./buffer.ts";
import { svmArrayBuffer } from "./svm-memory.ts";
import { getPlatforms } from "./platform.ts";
import { boolean, integer, keys, member, options as checkOptions, own } from "../check.ts";
import type { Context } from "./context.ts";
import type { CommandQueue } from "./queue.ts";
import { classes, register } from "./classes.ts";
import {
  callbackQueue,
  closeStatics,
  contextOf,
  fromFactory,
  genuine,
  handleOf,
  holdsMemory,
  nativeHandle,
  notByNew,
  reclaim,
  surrender,
  svmAddress,
  svmChecked,
  svmPassed,
  svmPointer,
  svmSize,
  unuseSVM,
  usesOf,
  useSVM,
} from "../internal.ts";

// Classes this module cannot import (see classes.ts), read at each call.
const cls = classes;

export interface SVMOptions {
  access?: Access;
  /** CL_MEM_SVM_FINE_GRAIN_BUFFER: host and device see the same bytes without map/unmap. */
  fineGrain?: boolean;
  /** CL_MEM_SVM_ATOMICS (needs fineGrain). */
  atomics?: boolean;
  /** Alignment in bytes, a power of two; 0 or absent for the device's default. */
  alignment?: number;
}

const svmKeys = keys("access", "fineGrain", "atomics", "alignment");

/** Safety net: an allocation the program forgot is freed with clSVMFree after it is collected. */
const net = new SafetyNet<{ context: Context; pointer: Pointer }, SVMAllocation>(({ context, pointer }) => {
  svmFree(cls.Context[nativeHandle](context), pointer);
  cls.disown(context);
}, (allocation) => SVMAllocation[finalizerState](allocation));

/**
 * clSVMAlloc and clSVMFree, one at a time in the whole process. NVIDIA's SVM allocator (580, H200)
 * is not thread-safe, whatever the OpenCL specification says of its API: from 4 threads of one
 * process at once, in C, clSVMAlloc returned NULL for 12 to 17 of 800 allocations, none with a lock
 * around both calls; under memlife, four `deno test --parallel` files that allocated and freed SVM
 * crashed in 3 runs of 3 (SIGSEGV in TBB's allocator, in Deno's runtime, in munmap: memory freed
 * from under other threads), and in 0 runs of 12 with the calls serialized
 * (test/device/results/svm-threads-nvidia-h200-2026-11-29.txt). So each such call of memlife's takes
 * a word that every realm of the process shares (`backend.processWord()`) with Atomics: 8-17 ns a
 * call when no other thread holds it (bench/js-cost.ts). Nothing but the native call runs while it
 * is held. PoCL's allocator takes locks of its own (four files at once passed 10 of 10 on the H200,
 * 12 of 12 here; 0 NULLs in C), so where every platform of the process is PoCL's, nothing is taken.
 */
let serializeSVM: boolean | undefined;
function svmNeedsLock(): boolean {
  // Every realm of the process sees the same platforms, so all decide alike.
  return serializeSVM = !getPlatforms().every((platform) => platform.name === "Portable Computing Language");
}
let svmWord: Int32Array | undefined;
function lockSVM(): Int32Array {
  const word = svmWord ??= backend.processWord();
  if (Atomics.compareExchange(word, 0, 0, 1) !== 0) waitForSVM(word);
  return word;
}
/**
 * Another thread is in clSVMAlloc or clSVMFree: spin a little, then sleep 20 us at a time. A holder
 * that never lets go is a Worker terminated inside the call (termination skips `finally`, and
 * MEMLIFE_ALLOW_WORKERS promises not to): after 1.5 million naps, 30 s at the least, the word is
 * taken anyway, a stall rather than a hang for good. Counted in naps, not read from a clock that
 * fake timers may hold still.
 */
function waitForSVM(word: Int32Array): void {
  for (let spins = 0; Atomics.compareExchange(word, 0, 0, 1) !== 0; spins++) {
    if (spins < 64) continue;
    if (spins > staleNaps) {
      Atomics.store(word, 0, 1);
      return;
    }
    Atomics.wait(napCell ??= new Int32Array(new SharedArrayBuffer(4)), 0, 0, 0.02);
  }
}
let staleNaps = 1_500_000;
/** For tests: after how many naps a held word is taken anyway. */
export function setStaleNaps(naps: number): void {
  staleNaps = naps;
}
let napCell: Int32Array | undefined;

let clSVMFree: ((...args: unknown[]) => unknown) | undefined;
function svmFree(context: Pointer, pointer: Pointer): void {
  const free = clSVMFree ??= optionalSymbol("clSVMFree", "an OpenCL 2.0 platform");
  if (!(serializeSVM ?? svmNeedsLock())) {
    free(context, pointer);
    return;
  }
  const word = lockSVM();
  try {
    free(context, pointer);
  } finally {
    Atomics.store(word, 0, 0);
  }
}
let clSVMAlloc: ((...args: unknown[]) => unknown) | undefined;

/** Kinds of allocation a context's devices can be checked for, as bits. */
const COARSE = 1, FINE = 2, ATOMICS = 4;

/**
 * The context's live cl_context for this kind of allocation of this size: throws unless every
 * device of the context can make it.
 */
function checkDevices(context: Context, size: number, fineGrain: boolean, atomics: boolean): Pointer {
  const kinds = COARSE | (fineGrain ? FINE : 0) | (atomics ? ATOMICS : 0);
  // Device capabilities do not change: the devices are asked once per context and kind
  // (`askDevices`), and the usual allocation asks the context once, for both the check and the
  // handle. Small, so that V8 inlines it into the allocation's constructor.
  return cls.Context[svmChecked](context, kinds, size) ?? askDevices(context, size, fineGrain, atomics, kinds);
}

/** `checkDevices` the first time for this context, kind and size (or a larger size). */
function askDevices(context: Context, size: number, fineGrain: boolean, atomics: boolean, kinds: number): Pointer {
  let maxSize = Infinity;
  for (const device of context.devices) {
    const caps = device.svm;
    const missing = !caps.coarseGrainBuffer
      ? "shared virtual memory"
      : fineGrain && !caps.fineGrainBuffer
      ? "fine-grain SVM buffers"
      : atomics && !caps.atomics
      ? "SVM atomics"
      : undefined;
    if (missing) {
      throw new OpenCLError(
        "clSVMAlloc",
        OpenCLStatus.CL_INVALID_OPERATION,
        `device "${device.name}" does not support ${missing} (CL_DEVICE_SVM_CAPABILITIES)`,
      );
    }
    if (size > device.maxMemAllocSize) {
      throw new RangeError(
        `SVM size ${size} exceeds CL_DEVICE_MAX_MEM_ALLOC_SIZE (${device.maxMemAllocSize}) of "${device.name}"`,
      );
    }
    maxSize = Math.min(maxSize, device.maxMemAllocSize);
  }
  cls.Context[svmPassed](context, kinds, maxSize);
  return cls.Context[handleOf](context);
}

/** `svmAlloc`'s options, checked: the flags and alignment for clSVMAlloc. */
function svmOptions(options: SVMOptions): { flags: number; fineGrain: boolean; atomics: boolean; alignment: number } {
  const bag = checkOptions(options, svmKeys, "svmAlloc options");
  const accessFlag = member(accessFlags, own(bag, "access"), "access", MemFlags.READ_WRITE);
  const fineGrain = boolean(own(bag, "fineGrain"), "fineGrain", false);
  const atomics = boolean(own(bag, "atomics"), "atomics", false);
  // A cl_uint: 2 ** 32 would reach C as 0 (the default alignment), 3 * 2 ** 32 as 0 too.
  const given = own(bag, "alignment");
  const alignment = given === undefined ? 0 : integer(given, "cl_uint", "alignment");
  if (alignment !== 0 && 2 ** Math.round(Math.log2(alignment)) !== alignment) {
    throw new RangeError(`alignment must be 0 or a power of two (a cl_uint), got ${alignment}`);
  }
  if (atomics && !fineGrain) {
    throw new TypeError(
      "atomics: true needs fineGrain: true (CL_MEM_SVM_ATOMICS is only valid with CL_MEM_SVM_FINE_GRAIN_BUFFER)",
    );
  }
  const flags = accessFlag | (fineGrain ? MemFlags.SVM_FINE_GRAIN_BUFFER : 0) | (atomics ? MemFlags.SVM_ATOMICS : 0);
  return { flags, fineGrain, atomics, alignment };
}

/** clSVMAlloc reports no code; after the checks, NULL means the allocation itself failed. */
function allocationFailed(size: number): OpenCLError {
  return new OpenCLError(
    "clSVMAlloc",
    OpenCLStatus.CL_MEM_OBJECT_ALLOCATION_FAILURE,
    `returned NULL for ${size} bytes, ${1 + SVM_ALLOC_RETRIES} times (it gives no error code)`,
  );
}

/**
 * `ctx.svmAlloc(size, options)`: the checks, clSVMAlloc, and the allocation's object, made apart
 * from the allocation so that its constructor stays small. V8 inlines a constructor into its caller
 * only within that caller's inlining budget, and a `new` it could not inline goes through the
 * generic construct stub: with the checks and the native call inside, the bench's SVM free loop on
 * Node paid 25 ns a free there (bench/perf-diff.ts --case=svm: Builtins_JSConstructStubGeneric,
 * Builtins_FastNewObject).
 */
export function allocateSVM(context: Context, size: number, options: SVMOptions | undefined): SVMAllocation {
  if (options !== undefined) return allocateWith(context, size, options);
  integer(size, "size_t", "SVM size", 1);
  const pointer = svmAllocCall(checkDevices(context, size, false, false), MemFlags.READ_WRITE, size, 0);
  return new SVMAllocation(fromFactory, context, pointer, size, false);
}

/** `allocateSVM` with options, out of line: they are read after the size is checked, before the devices. */
function allocateWith(context: Context, size: number, options: SVMOptions): SVMAllocation {
  integer(size, "size_t", "SVM size", 1);
  const { flags, fineGrain, atomics, alignment } = svmOptions(options);
  const pointer = svmAllocCall(checkDevices(context, size, fineGrain, atomics), flags, size, alignment);
  return new SVMAllocation(fromFactory, context, pointer, size, fineGrain);
}

function svmAllocCall(context: Pointer, flags: number, size: number, alignment: number): Pointer {
  return lockedAlloc(context, flags, size, alignment) ?? askAgain(context, flags, size, alignment);
}

function lockedAlloc(context: Pointer, flags: number, size: number, alignment: number): Pointer | null {
  const alloc = clSVMAlloc ??= optionalSymbol("clSVMAlloc", "an OpenCL 2.0 platform");
  if (!(serializeSVM ?? svmNeedsLock())) return alloc(context, flags, size, alignment) as Pointer | null;
  const word = lockSVM();
  try {
    return alloc(context, flags, size, alignment) as Pointer | null;
  } finally {
    Atomics.store(word, 0, 0);
  }
}

/** How often a NULL from clSVMAlloc is asked again before it counts (see `askAgain`). */
const SVM_ALLOC_RETRIES = 3;

/**
 * A NULL from clSVMAlloc is asked again before it is the program's CL_MEM_OBJECT_ALLOCATION_FAILURE:
 * NVIDIA's (580, H200) returned NULL now and then while threads of one process allocated at once,
 * 1 to 7 of 100 allocations of 4 KiB in each of four threads, memory to spare. memlife's own calls
 * no longer overlap (`lockSVM`), but other code of the process may still allocate SVM on another
 * thread (a driver that frees on its own thread: NULLs in C even with the lock). Only a failed
 * allocation pays for it.
 */
function askAgain(context: Pointer, flags: number, size: number, alignment: number): Pointer {
  for (let i = 0; i < SVM_ALLOC_RETRIES; i++) {
    const again = lockedAlloc(context, flags, size, alignment);
    if (again !== null) return again;
  }
  throw allocationFailed(size);
}

/**
 * One clSVMAlloc allocation. Free it with `release()` (clSVMFree, at once) or in queue order with
 * `queue.enqueueSVMFree([alloc])`; after either, using it throws ReleasedError.
 * @example
 * import { cl } from "memlife";
 * using ctx = cl.createContext();
 * using queue = ctx.createCommandQueue();
 * const a = ctx.svmAlloc(1024, { fineGrain: true });
 * new Uint8Array(a.arrayBuffer).fill(7);
 * await queue.enqueueSVMFree([a]).wait();
 */
export class SVMAllocation {
  #pointer: Pointer | null;
  /** What `surrender()` took, for `reclaim()`. */
  #taken: Pointer | null = null;
  /** Made on first use: most allocations are only ever passed back to OpenCL as pointers. */
  #address: bigint | undefined = undefined;
  readonly #context: Context;
  // Private behind getters: memlife reads them for the sizes it hands C, and a program could
  // otherwise assign them (an `alloc.size` made larger had a memcpy run past the memory: SIGSEGV).
  readonly #size: number;
  readonly #fineGrain: boolean;
  /** Enqueued commands that use it and have not completed. */
  #uses = 0;
  /** Released while commands used it: freed with clSVMFree when the last of them completes. */
  #deferred: Pointer | null = null;

  /** @internal Whether `value` is one itself, not a Proxy of one (see `genuine` in internal.ts). */
  static [genuine](value: unknown): value is SVMAllocation {
    return typeof value === "object" && value !== null && #pointer in value;
  }

  /** @internal use `ctx.svmAlloc()`: `pointer` is what clSVMAlloc returned for the context (see `allocateSVM`). */
  constructor(made: typeof fromFactory, context: Context, pointer: Pointer, size: number, fineGrain: boolean) {
    if (made !== fromFactory) notByNew("cl.SVMAllocation", "ctx.svmAlloc()");
    this.#pointer = pointer;
    this.#context = context;
    this.#size = size;
    this.#fineGrain = fineGrain;
    cls.adopt(context); // through the Context class (see classes.ts): whatever the context's prototype
    net.add(this);
  }

  /** @internal What the safety net registers (see `finalizerState`). */
  static [finalizerState](allocation: SVMAllocation): { context: Context; pointer: Pointer } | undefined {
    if (allocation.#pointer === null) return undefined;
    return { context: allocation.#context, pointer: allocation.#pointer };
  }

  /** The context it belongs to. */
  get context(): Context {
    return this.#context;
  }

  /** @internal The context from the private field (see `contextOf`). */
  static [contextOf](x: SVMAllocation): Context {
    return x.#context;
  }

  get alive(): boolean {
    return this.#pointer !== null;
  }

  /** Size in bytes. */
  get size(): number {
    return this.#size;
  }

  get fineGrain(): boolean {
    return this.#fineGrain;
  }

  /** @internal The size in bytes, from the private field (an own `size` may lie). */
  static [svmSize](allocation: SVMAllocation): number {
    return allocation.#size;
  }

  /** The SVM pointer as a number-like address, valid on host and device. */
  get address(): bigint {
    return SVMAllocation[svmAddress](this);
  }

  /** @internal `address`, read from the private fields: a program can shadow `address` with its own. */
  static [svmAddress](allocation: SVMAllocation): bigint {
    if (allocation.#pointer === null) throw new ReleasedError("SVMAllocation");
    return allocation.#address ??= backend.address(allocation.#pointer);
  }

  /**
   * @internal The SVM pointer, through the class, for an allocation the caller brand-checked (see
   * Buffer's `commandHandle`).
   */
  /** @internal Neither released nor handed to a free (see svm-memory.ts, `allocationBehind`). */
  static [holdsMemory](allocation: SVMAllocation): boolean {
    return allocation.#pointer !== null;
  }

  static [svmPointer](allocation: SVMAllocation): Pointer {
    if (allocation.#pointer === null) throw new ReleasedError("SVMAllocation");
    return allocation.#pointer;
  }

  /**
   * The memory as an ArrayBuffer, no copy (fine-grain allocations only: coarse-grain SVM must be
   * mapped first). Do not touch it after the allocation is freed. While the program holds it, the
   * safety net leaves the allocation alone; a command or a `hostPtr: "use"` buffer given a view of
   * it counts as a use of the allocation, which `release()` waits for.
   */
  get arrayBuffer(): ArrayBuffer {
    const pointer = SVMAllocation[svmPointer](this);
    if (!this.#fineGrain) {
      throw new TypeError(
        "only fine-grain SVM (svmAlloc(size, { fineGrain: true })) can be viewed from the host without mapping",
      );
    }
    return svmArrayBuffer(backend.arrayBuffer(pointer, this.#size), this);
  }

  /**
   * @internal The allocation now belongs to a free command (or is freed): no more use. It leaves
   * `liveObjects` here: for a free command at enqueue, though the memory goes back when it runs.
   * Static, as the others a free command calls: an allocation given another prototype is freed.
   */
  static [surrender](a: SVMAllocation): Pointer {
    const pointer = SVMAllocation[svmPointer](a);
    net.remove(a); // first: what throws must leave the allocation as it was (no double free)
    a.#taken = pointer;
    a.#pointer = null;
    cls.disown(a.#context);
    return pointer;
  }

  /**
   * @internal The free command that took the pointer with `surrender()` did not happen (it threw,
   * or failed): the allocation is the program's again, as before.
   */
  static [reclaim](a: SVMAllocation): void {
    a.#pointer = a.#taken;
    cls.adopt(a.#context);
    net.add(a);
  }

  /**
   * @internal A command that uses the allocation was enqueued; `unuse` when it completed. The
   * command's completion entry holds the allocation meanwhile, so the safety net cannot free it.
   * Static, as `unuse`: an allocation given another prototype had a kernel's enqueue throw
   * TypeError after the command was enqueued (its event lost).
   */
  static [useSVM](a: SVMAllocation): void {
    a.#uses++;
  }

  /** @internal A command counted by `use` completed (or failed). */
  static [unuseSVM](a: SVMAllocation): void {
    if (--a.#uses === 0 && a.#deferred !== null) {
      const pointer = a.#deferred;
      a.#deferred = null;
      svmFree(cls.Context[nativeHandle](a.#context), pointer);
      cls.disown(a.#context);
    }
  }

  /** @internal `commandsInFlight`, read through the class (an own property could shadow the getter). */
  static [usesOf](a: SVMAllocation): number {
    return a.#uses;
  }

  /** Enqueued commands that use the allocation and have not completed yet (as memlife last heard). */
  get commandsInFlight(): number {
    return this.#uses;
  }

  /**
   * Frees it with clSVMFree. While enqueued commands still use it (a kernel argument, a memcpy, a
   * mapping not yet unmapped), the free waits until the last of them completed: the allocation is
   * unusable at once (ReleasedError), the memory goes back in queue order, never under a running
   * command. `enqueueSVMFree` does the same natively, and can tell you when (`onFree`).
   */
  release(): void {
    if (this.#pointer === null) return;
    if (this.#uses > 0) {
      net.remove(this); // first: what throws must leave the allocation as it was (no double free)
      this.#deferred = this.#pointer;
      this.#pointer = null;
      return;
    }
    const context = cls.Context[nativeHandle](this.#context);
    svmFree(context, SVMAllocation[surrender](this));
  }

  [Symbol.dispose](): void {
    this.release();
  }

  static {
    closeStatics(this);
  }
}

// Other modules reach allocations through the class (see classes.ts).
register("SVMAllocation", SVMAllocation);

// --- clEnqueueSVMFree ----------------------------------------------------------------------------

/** May be `async`: a rejection of the promise it returns counts as a throw. */
export type SVMFreeCallback = (queue: CommandQueue, allocations: SVMAllocation[]) => unknown;

/** A free that calls back, from its enqueue until its callback ran (its user_data is the id). */
export interface PendingFree {
  readonly queue: CommandQueue;
  readonly context: Pointer;
  readonly allocations: SVMAllocation[];
  /** Kept here: in Bun the native svm_pointers array is gone by the time the callback runs. */
  readonly pointers: Pointer[];
  readonly onFree: SVMFreeCallback | undefined;
  /**
   * The callback holds the event loop until it came: with onFree, and in a Worker, whose end before
   * it had the driver thread call into a gone isolate. Else nothing is owed: the program may end first.
   */
  readonly holds: boolean;
  /** Counted by owe(), once the enqueue returned without the callback (holds, and not arrived). */
  owed: boolean;
  /**
   * The callback came and did its part (runFree is deferred), by a plain store after the last step
   * that may throw: read by the enqueue whose call threw at the edge of the stack.
   */
  arrived: boolean;
  /** The enqueue threw (before its callback came) or failed: the callback, should it come, does nothing. */
  abandoned: boolean;
  /**
   * How many of `allocations` the free took from the program, after the call succeeded: all of
   * them but where the edge of the stack stopped the enqueue. Only those are freed and passed on.
   */
  surrendered: number;
  readonly outcome: CallbackOutcome;
  /** Resolves `called`: onFree was called and returned (or threw), or will never be called. */
  readonly calledBack: () => void;
}

const pendingFrees = new IdTable<PendingFree>();

/**
 * NVIDIA calls it inside clEnqueueSVMFree, on the JS thread, where at the edge of the stack any
 * step may throw RangeError; the enqueue's catch then reads `arrived` (a plain read: a call could
 * throw again there). So `arrived` is set once runFree is deferred, and a step that throws leaves
 * nothing the catch or a later step depends on half done.
 */
export const svmFreeTrampoline = trampolines.svmFree((_queue, _count, _pointers, id) => {
  const entry = pendingFrees.get(id);
  if (entry === undefined || entry.arrived || entry.abandoned) return;
  if (entry.owed) {
    paid();
    entry.owed = false;
  }
  defer(runFree, entry);
  entry.arrived = true;
  pendingFrees.delete(id);
});

function runFree(entry: PendingFree): void {
  // Deferred by a callback that ran out of stack before `arrived`: its enqueue threw, the program
  // keeps the allocations. And an enqueue stopped before it took any allocation frees nothing.
  if (!entry.arrived || entry.surrendered === 0) return entry.calledBack();
  const allocations = entry.surrendered === entry.allocations.length
    ? entry.allocations
    : entry.allocations.slice(0, entry.surrendered);
  let threw = false;
  let failure: unknown;
  let later: PromiseLike<unknown> | undefined;
  // A queue object of the callback's own when the program released its queue meanwhile.
  let borrowed: CommandQueue | undefined;
  try {
    if (entry.onFree !== undefined) {
      const queue = cls.CommandQueue[callbackQueue](entry.queue);
      if (queue !== entry.queue) borrowed = queue;
      later = returnedPromise(entry.onFree(queue, allocations));
    }
  } catch (error) {
    // Whatever was thrown, `undefined` included, is a failure.
    threw = true;
    failure = error;
  } finally {
    // pfn_free_func owns the freeing: every pointer exactly once, whatever onFree did.
    freeSurrendered(entry);
    entry.calledBack();
  }
  if (later === undefined) {
    borrowed?.release();
    entry.outcome.settle(threw, failure);
  } else {
    // An `async` onFree: its rejection is its throw, delivered like one.
    Promise.resolve(later).then(
      () => {
        borrowed?.release();
        entry.outcome.settle(false);
      },
      (error) => {
        borrowed?.release();
        entry.outcome.settle(true, error);
      },
    );
  }
}

/**
 * Registers a free that calls back; returns its user_data id, the outcome it settles, and
 * `called`, which resolves once onFree was called and returned (an `async` one's promise may still
 * be pending: that is what `outcome` waits for). With onFree (or in a Worker) the callback is owed (it
 * holds the event loop); without, memlife's callback only frees.
 */
export function registerFree(
  queue: CommandQueue,
  context: Pointer,
  allocations: SVMAllocation[],
  pointers: Pointer[],
  onFree: SVMFreeCallback | undefined,
): { id: number; entry: PendingFree; outcome: CallbackOutcome; called: Promise<void> } {
  const outcome = new CallbackOutcome("svmFree");
  let resolveCalled: (() => void) | undefined;
  const called = new Promise<void>((resolve) => (resolveCalled = resolve));
  const calledBack = executorRan(resolveCalled, called);
  const entry: PendingFree = {
    queue,
    context,
    allocations,
    pointers,
    onFree,
    holds: onFree !== undefined || inWorker,
    owed: false,
    arrived: false,
    abandoned: false,
    surrendered: 0,
    outcome,
    calledBack,
  };
  return { id: pendingFrees.add(entry), entry, outcome, called };
}

function freeSurrendered(entry: PendingFree): void {
  for (let i = 0; i < entry.surrendered; i++) svmFree(entry.context, entry.pointers[i]);
}

/**
 * The enqueue returned: a callback still to come holds the event loop from here. Not before the
 * call: at the edge of the stack a count taken before it could not always be given back.
 */
export function oweFree(id: number): void {
  const entry = pendingFrees.get(id);
  if (entry === undefined || !entry.holds || entry.arrived || entry.owed) return;
  owe();
  entry.owed = true;
}

/**
 * Frees whose command waits on events, watched until their callback arrives. PoCL never calls
 * pfn_free_func, nor any event callback, when an event of the wait list failed, nor frees the
 * memory itself when there is no pfn_free_func: the allocations would stay allocated, and an owed
 * callback would keep the program alive for ever. So while such a free is pending, its event's
 * status is polled; a failed command's allocations are freed here, once, without onFree (it never
 * ran), and `wait()` rejects with the command's failure. The poll holds the event loop only while
 * a watched free has an onFree.
 */
const watched: { id: number; entry: PendingFree; event: Pointer }[] = [];
const poll = new StatusPoll(pollFailures);

export function watchFailure(id: number, eventSlot: BigUint64Array): void {
  const entry = pendingFrees.get(id);
  const event = backend.fromAddress(eventSlot[0]);
  if (entry === undefined || event === null) return;
  if (opencl().symbols.clRetainEvent(event) !== OpenCLStatus.CL_SUCCESS) return;
  watched.push({ id, entry, event });
  poll.start(entry.holds);
}

function pollFailures(): boolean {
  const lib = opencl().symbols;
  for (let i = watched.length - 1; i >= 0; i--) {
    const { id, entry, event } = watched[i];
    // Gone from the table, or the id reused: the callback arrived.
    let done = pendingFrees.get(id) !== entry;
    if (!done && (infoU32("clGetEventInfo", lib.clGetEventInfo, event, EventInfo.COMMAND_EXECUTION_STATUS) | 0) < 0) {
      pendingFrees.delete(id);
      if (entry.owed) {
        paid();
        entry.owed = false;
      }
      freeSurrendered(entry);
      entry.calledBack();
      entry.outcome.settle(false);
      done = true;
    }
    if (done) {
      lib.clReleaseEvent(event);
      watched.splice(i, 1);
    }
  }
  if (watched.length === 0) return false;
  if (watched.every((w) => !w.entry.holds)) poll.letLoopGo();
  return true;
}

/** The driver refused the free (an error status): it will never call. */
export function abandonFree(id: number): void {
  pendingFrees.delete(id);
}
