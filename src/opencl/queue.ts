/** Command queues: reads, writes, SVM frees, finish. Nothing here blocks the JS thread. */
import type { Pointer } from "../../ffi/types.ts";
import { arrayBufferDetached } from "../../ffi/views.ts";
import {
  type CallbackOutcome,
  defer,
  finalizerState,
  IdTable,
  owe,
  paid,
  SafetyNet,
  StatusPoll,
  timer,
} from "../callbacks.ts";
import { trampolines } from "../trampolines.ts";
import { OpenCLError, ReleasedError } from "../errors.ts";
import {
  callable,
  integer,
  keys,
  listLength,
  member,
  memoryBytes,
  names,
  options as checkOptions,
  own,
  plainObject,
  readOnly,
  show,
  sizeOr,
  unknownOption,
} from "../check.ts";
import { EventInfo, ExecutionStatus, QueueInfo } from "./constants.ts";
import { OpenCLStatus } from "./status-codes.ts";
import {
  check,
  errcode,
  eventOut,
  infoU32,
  infoU64,
  opencl,
  optionalSymbol,
  releaseFailed,
  scratchPointers,
} from "./native.ts";
import { Buffer } from "./buffer.ts";
import {
  basicDriver,
  commandMade,
  type CommandTracker,
  Event,
  FailureGuard,
  gatedWaitPending,
  guardMarker,
  guardsFailures,
  markerEnded,
  userEventsOpen,
  waitEvents,
  waitHandles,
} from "./event.ts";
import {
  abandonFree,
  oweFree,
  registerFree,
  SVMAllocation,
  type SVMFreeCallback,
  svmFreeTrampoline,
  watchFailure,
} from "./svm.ts";
import { heldByBuffer, svmArrayBuffer, withAllocationsBehind } from "./svm-memory.ts";
import { Kernel, ndrangeSizes, TypedValue } from "./kernel.ts";
import { backend, inWorker } from "../backend.ts";
import { MapFlags } from "./constants.ts";
import type { Context } from "./context.ts";
import { Device } from "./platform.ts";
import { classes, register } from "./classes.ts";
import {
  callbackQueue,
  closeStatics,
  commandHandle,
  commandUses,
  completedThrough,
  contextOf,
  executableOn,
  fromFactory,
  genuine,
  handleOf,
  localMemoryFits,
  nativeHandle,
  newCommand,
  notByNew,
  pinCommand,
  reclaim,
  releaseOf,
  retainOf,
  sizeOf,
  surrender,
  svmPointer,
  svmSize,
  unuseSVM,
  usesOf,
  useSVM,
  waitListOf,
} from "../internal.ts";

// Classes this module cannot import (see classes.ts), read at each call.
const cls = classes;

const net = new SafetyNet<{ handle: Pointer; context: Context; refs: number }, CommandQueue>(
  ({ handle, context, refs }) => {
    for (let i = 1; i < refs; i++) releaseQueue(handle, null);
    releaseQueue(handle, context);
  },
  (queue) => CommandQueue[finalizerState](queue),
);

/**
 * One native release, off the JS thread (it may finish the queue); async calls run in call order.
 * `context` only with the last reference: the queue stops counting as its child once that
 * release returned. No caller can receive its failure: it goes to `onCallbackError` (source
 * "release").
 */
function releaseQueue(handle: Pointer, context: Context | null): void {
  opencl().async.clReleaseCommandQueue(handle).then(
    // Through the Context class: a context given another prototype had this throw (an unhandled
    // rejection: Node exited), and it was never released.
    (status) => {
      if (context !== null) cls.disown(context);
      releaseFailed("clReleaseCommandQueue", status as number);
    },
    (error) => {
      if (context !== null) cls.disown(context);
      releaseFailed("clReleaseCommandQueue", error);
    },
  );
}

let clEnqueueSVMFree: ((...args: unknown[]) => unknown) | undefined;
let clEnqueueSVMFreeQuiet: ((...args: unknown[]) => unknown) | undefined;

export interface TransferOptions {
  /** Byte offset into the buffer (default 0). */
  offset?: number;
  /** Events that must complete first. */
  waitFor?: readonly Event[];
}

export interface SVMFreeOptions {
  /**
   * Called on the JS thread once the free command ran, with this queue and the allocations in the
   * order given; memlife frees them with clSVMFree right after it returns (or throws). The queue
   * may be used inside it, also when the program released it meanwhile (it then gets a queue
   * object of its own, released once the callback is done).
   */
  onFree?: SVMFreeCallback;
  waitFor?: readonly Event[];
}

const transferKeys = keys("offset", "waitFor");
const svmFreeKeys = keys("onFree", "waitFor");
const waitForKeys = keys("waitFor");
const ndrangeKeys = keys("local", "offset", "waitFor");
const svmCopyKeys = keys("size", "srcOffset", "dstOffset", "waitFor");
const svmMapKeys = keys("access", "offset", "size", "waitFor");
const copyBufferKeys = keys("srcOffset", "dstOffset", "size", "waitFor");
const rangeKeys = keys("offset", "size", "waitFor");

/** A read's or write's options, each read once: `readBuffer` needs the offset before the call. */
function transferOptions(options: TransferOptions | undefined): { offset: number; waitFor: unknown } {
  const bag = checkOptions(options, transferKeys, "transfer options");
  const given = own(bag, "offset");
  return { offset: given === undefined ? 0 : integer(given, "size_t", "offset"), waitFor: own(bag, "waitFor") };
}

/**
 * The pointer to pass for `view`. A zero-length transfer is valid in C, with a non-NULL pointer
 * (clEnqueueReadBuffer refuses a NULL one with CL_INVALID_VALUE), but an empty view goes down as
 * NULL on Deno and Node; one byte of memory of our own, never touched, stands in for it.
 */
function hostPointer(view: ArrayBufferView, byteLength: number): ArrayBufferView {
  return byteLength === 0 ? noBytes : view;
}
const noBytes = new Uint8Array(new ArrayBuffer(8));

export interface NDRangeOptions {
  /** Work-group size per dimension (default: the driver picks). */
  local?: readonly number[];
  /** Global work offset per dimension (default: zeros). */
  offset?: readonly number[];
  waitFor?: readonly Event[];
}

export interface SVMCopyOptions {
  /** Bytes to copy (default: what is left of `src` after `srcOffset`). */
  size?: number;
  srcOffset?: number;
  dstOffset?: number;
  waitFor?: readonly Event[];
}

export interface RangeOptions {
  /** Byte offset (default 0). */
  offset?: number;
  /** Bytes (default: the rest after `offset`). */
  size?: number;
  waitFor?: readonly Event[];
}

export type MapAccess = "read" | "write" | "read_write" | "write_invalidate";
export interface SVMMapOptions extends RangeOptions {
  /** What the host does with the mapped range (default "read_write"); "write_invalidate" discards its contents. */
  access?: MapAccess;
}

export interface CopyBufferOptions {
  srcOffset?: number;
  dstOffset?: number;
  /** Bytes (default: what is left of `src` after `srcOffset`). */
  size?: number;
  waitFor?: readonly Event[];
}

const mapFlags: Readonly<Record<MapAccess, number>> = names({
  read: MapFlags.READ,
  write: MapFlags.WRITE,
  read_write: MapFlags.READ | MapFlags.WRITE,
  write_invalidate: MapFlags.WRITE_INVALIDATE_REGION,
});

function offsetPointer(pointer: Pointer, offset: number): Pointer {
  return offset === 0 ? pointer : backend.fromAddress(backend.address(pointer) + BigInt(offset)) as Pointer;
}

/** What a command uses that OpenCL does not keep alive itself, until the command completed. */
interface Pin {
  readonly seq: number;
  /** Allocations counted as used (`use()`) until then. */
  readonly svm: SVMAllocation[] | undefined;
  /** Host memory the command reads or writes. */
  readonly host: unknown;
  /**
   * The pin's own reference to the command's cl_event (or to a marker enqueued right after it), or
   * null when neither could be had. Its status, not the queue's order, says that the command ended:
   * PoCL 3.1 fails a command whose wait list failed at once, and runs the commands after it, while
   * one before it is still queued (see `ended`).
   */
  event: Pointer | null;
  /** A completion callback is armed on `event` and has not come yet. */
  armed: boolean;
}

/**
 * Whether the command of `pin` ended (completed or failed), where the queue learnt that every
 * command through a later one ended (`known`) or that one of them failed (`known` false). An
 * in-order queue completes in order, but PoCL 3.1 breaks the order after a failure: a command
 * whose wait list failed fails at once, and those after it run, while one before it is still
 * queued. A wait, finish() or armed callback on a later command took the queued one for ended, and
 * freed what it used under it (a hostile pass: a copy wrote into freed SVM memory, SIGSEGV on all
 * three runtimes; test/fixtures/pins-after-failure.ts).
 */
function ended(pin: Pin, known: boolean): boolean {
  if (pin.event === null) return known;
  try {
    return (infoU32("clGetEventInfo", opencl().symbols.clGetEventInfo, pin.event, EventInfo.COMMAND_EXECUTION_STATUS) |
      0) <= 0;
  } catch {
    // Unreadable: the queue's order, as without an event. A throw here would reach the wait, or
    // the armed callback's deferral, that told the queue.
    return known;
  }
}

/**
 * Queues holding pins. A program may drop the queue and everything its commands use right after
 * enqueueing: this set keeps them reachable (so the safety net frees nothing under a command)
 * until the commands are known to have completed.
 */
const busy = new Set<CommandQueue>();

/** Completion callbacks armed by queues that nobody waits on; each owns a retained cl_event. */
const armed = new IdTable<Armed>();
interface Armed {
  queue: CommandQueue;
  pin: Pin;
  handle: Pointer;
  /** Its address, which a callback must name: the poll frees the ids of the entries it settles. */
  address: bigint;
  completed: boolean;
}
const completedTrampoline = trampolines.queueCompletion((event, status, id) => {
  const entry = armed.get(id);
  if (entry === undefined || backend.address(event) !== entry.address) return;
  armed.delete(id);
  if (inWorker) paid();
  entry.completed = status === ExecutionStatus.COMPLETE;
  // Released and pruned on the JS thread, never inside a driver's call.
  defer(settleArmed, entry);
});

/**
 * The armed callbacks are polled, as `wait()`'s are (event.ts): PoCL 3.1 calls none for a command
 * that fails because an event it waits on failed. Its pins were kept until some later wait() or
 * finish() on the queue, and in a Worker the callback owed held the event loop for ever (a hostile
 * pass; test/robust-async.spec.ts "a pinned command nobody waits on"). The timer holds nothing.
 */
const armedPoll = new StatusPoll(pollArmed);

function pollArmed(): boolean {
  const lib = opencl().symbols;
  armed.forEach((entry, id) => {
    const status = infoU32("clGetEventInfo", lib.clGetEventInfo, entry.handle, EventInfo.COMMAND_EXECUTION_STATUS) | 0;
    if (status >= 0) return;
    armed.delete(id);
    if (inWorker) paid();
    settleArmed(entry);
  });
  return armed.size > 0;
}

function settleArmed(entry: Armed): void {
  opencl().symbols.clReleaseEvent(entry.handle);
  entry.pin.armed = false;
  CommandQueue[completedThrough](entry.queue, entry.pin.seq, entry.completed);
}

/** How long pins may wait for a `wait()` or `finish()` before a completion callback is armed. */
const ARM_AFTER_MS = 1;

let clEnqueueSVMMemcpy: ((...args: unknown[]) => unknown) | undefined;
let clEnqueueSVMMemFill: ((...args: unknown[]) => unknown) | undefined;
let clEnqueueSVMMap: ((...args: unknown[]) => unknown) | undefined;
let clEnqueueSVMUnmap: ((...args: unknown[]) => unknown) | undefined;

/**
 * Mappings not yet unmapped, per allocation. clEnqueueSVMFree of a mapped range would free it
 * under the mapping's ArrayBuffer and before its unmap (queue order), so enqueueSVMFree refuses it.
 */
const mappedCount = new WeakMap<SVMAllocation, number>();
/** No lookup in `mappedCount` on the free's path until an allocation was mapped. */
let anyMapped = false;

/** What the safety net needs to unmap a mapping the program dropped: never the mapping itself. */
interface MappingHeld {
  queue: CommandQueue;
  allocation: SVMAllocation;
  pointer: Pointer;
}

/**
 * Safety net: a mapping dropped without `unmap()` is unmapped, so that its allocation can be freed.
 * Before, the map's use of the allocation never ended: `release()` of the allocation waited for
 * ever and the memory leaked. The mapping's reference to its queue keeps the queue for this. The
 * queue is asked through its class, as by `unmap()`: an own `alive: false` on it stopped the unmap
 * for good, and another prototype had it throw TypeError.
 */
const mappingNet = new SafetyNet<MappingHeld, SVMMapping>(({ queue, allocation, pointer }) => {
  let handle: Pointer;
  try {
    handle = CommandQueue[handleOf](queue);
  } catch {
    return; // released more times than retained: nothing can unmap it
  }
  try {
    const unmap = clEnqueueSVMUnmap ??= optionalSymbol("clEnqueueSVMUnmap", "an OpenCL 2.0 platform");
    const status = unmap(handle, pointer, 0, null, eventOut) as number;
    if (status !== OpenCLStatus.CL_SUCCESS) return releaseFailed("clEnqueueSVMUnmap", status);
    unmapped(allocation);
    const event = CommandQueue[newCommand](queue);
    CommandQueue[pinCommand](queue, event, [allocation], undefined);
    SVMAllocation[unuseSVM](allocation);
    event.release();
  } finally {
    CommandQueue[releaseOf](queue); // the mapping's reference
  }
}, (mapping) => SVMMapping[finalizerState](mapping));

/** ArrayBuffer.prototype.transfer (ES2024), where the engine has it: what `unmap()` detaches with. */
const arrayBufferTransfer = (ArrayBuffer.prototype as { transfer?: (this: ArrayBuffer, length: number) => ArrayBuffer })
  .transfer;

/** One mapping of `allocation` less. */
function unmapped(allocation: SVMAllocation): void {
  const left = (mappedCount.get(allocation) ?? 1) - 1;
  if (left === 0) mappedCount.delete(allocation);
  else mappedCount.set(allocation, left);
}

/**
 * A coarse-grain (or fine-grain) SVM range mapped for the host. `arrayBuffer` is the range itself,
 * no copy, valid once the map command completed (`queue.mapSVM` waits for that) and detached by
 * `unmap()`, so no view can touch the memory after the device got it back.
 * @example
 * const m = await queue.mapSVM(alloc, { access: "read" });
 * console.log(new Float32Array(m.arrayBuffer)[0]);
 * const unmapped = m.unmap();
 * await unmapped.wait();
 * unmapped.release();
 */
export class SVMMapping {
  // Private behind getters: memlife reads them for the memory it hands out and unmaps, and a
  // program could otherwise assign them (a larger `size` gave an arrayBuffer past the range: SIGSEGV).
  readonly #allocation: SVMAllocation;
  readonly #offset: number;
  readonly #size: number;
  /** The map command (released by `queue.mapSVM`, which already waited on it). */
  readonly event: Event;
  #queue: CommandQueue;
  #pointer: Pointer;
  #buffer: ArrayBuffer | undefined;
  #mapped = true;

  /** @internal use `queue.enqueueSVMMap()` or `queue.mapSVM()`. */
  constructor(
    made: typeof fromFactory,
    queue: CommandQueue,
    allocation: SVMAllocation,
    pointer: Pointer,
    offset: number,
    size: number,
    event: Event,
  ) {
    if (made !== fromFactory) notByNew("cl.SVMMapping", "queue.enqueueSVMMap()");
    this.#queue = queue;
    this.#allocation = allocation;
    this.#pointer = pointer;
    this.#offset = offset;
    this.#size = size;
    this.event = event;
    // A reference of the mapping's own until it is unmapped: the program may release the queue
    // first (`using`), and then nothing could unmap it (its allocation was in use for good). Through
    // the class, as every call on the queue here: an own `retain` took no reference, and the unmap
    // then dropped the program's.
    CommandQueue[retainOf](queue);
    mappingNet.add(this);
  }

  get allocation(): SVMAllocation {
    return this.#allocation;
  }

  /** Offset of the range in the allocation, in bytes. */
  get offset(): number {
    return this.#offset;
  }

  /** Size of the range in bytes. */
  get size(): number {
    return this.#size;
  }

  get mapped(): boolean {
    return this.#mapped;
  }

  /** For the safety net: mapped. */
  get alive(): boolean {
    return this.#mapped;
  }

  /** @internal What the safety net registers (see `finalizerState`). */
  static [finalizerState](mapping: SVMMapping): MappingHeld | undefined {
    if (!mapping.#mapped) return undefined;
    return { queue: mapping.#queue, allocation: mapping.#allocation, pointer: mapping.#pointer };
  }

  /** The mapped bytes. Throws ReleasedError after `unmap()`; views made before then are detached. */
  get arrayBuffer(): ArrayBuffer {
    if (!this.#mapped) throw new ReleasedError("SVMMapping (unmapped)");
    return this.#buffer ??= svmArrayBuffer(backend.arrayBuffer(this.#pointer, this.#size), this.#allocation, this);
  }

  /** Enqueues clEnqueueSVMUnmap and detaches `arrayBuffer` at once. */
  unmap(options?: { waitFor?: readonly Event[] }): Event {
    if (!this.#mapped) throw new ReleasedError("SVMMapping (already unmapped)");
    const queue = this.#queue;
    CommandQueue[handleOf](queue);
    const events = waitEvents(own(checkOptions(options, waitForKeys, "unmap options"), "waitFor"));
    // Unmapped again by a getter above: nothing left to do, and a second unmap would be an error.
    if (!this.#mapped) throw new ReleasedError("SVMMapping (already unmapped)");
    const handle = CommandQueue[handleOf](queue);
    const { count, list } = CommandQueue[waitListOf](queue, events, "clEnqueueSVMUnmap");
    const unmap = clEnqueueSVMUnmap ??= optionalSymbol("clEnqueueSVMUnmap", "an OpenCL 2.0 platform");
    check("clEnqueueSVMUnmap", unmap(handle, this.#pointer, count, list, eventOut) as number);
    this.#mapped = false;
    mappingNet.remove(this);
    unmapped(this.#allocation);
    // Detaching (transfer to a new empty buffer) leaves the native memory as it is.
    const buffer = this.#buffer;
    this.#buffer = undefined;
    // Transferred away by the program already: that ArrayBuffer is beyond reach (README, Lifetimes).
    // The engine's own `detached` and `transfer`, not the ArrayBuffer's: the program can give it
    // its own, and code of the program's run here, with the unmap enqueued and its event not yet
    // read from the shared scratch, had a command it enqueued taken for the unmap (its event
    // wrapped twice: SIGSEGV; test/fixtures/robust-prototype-traps.ts).
    if (buffer !== undefined && arrayBufferTransfer !== undefined && arrayBufferDetached?.call(buffer) !== true) {
      arrayBufferTransfer.call(buffer, 0);
    }
    const event = CommandQueue[newCommand](queue);
    // The map counted as a use of the allocation: the unmap's pin takes it over.
    CommandQueue[pinCommand](queue, event, [this.#allocation], undefined);
    SVMAllocation[unuseSVM](this.#allocation);
    CommandQueue[releaseOf](queue); // the mapping's reference (see the constructor)
    return event;
  }

  /** Unmaps (if still mapped) and forgets the unmap event. */
  [Symbol.dispose](): void {
    if (this.#mapped) this.unmap().release();
  }

  static {
    closeStatics(this);
  }
}

/** `size` bytes at `offset` (both checked size_t values) fit in the buffer. */
function checkRange(buffer: Buffer, offset: number, size: number): void {
  const total = Buffer[sizeOf](buffer);
  if (offset + size > total) {
    throw new RangeError(`${size} bytes at offset ${offset} do not fit in a buffer of ${total} bytes`);
  }
}

/** Out of line: enqueueSVMFree's front stays small enough for V8 to inline. */
function notAllocationList(value: unknown): TypeError {
  return new TypeError(`enqueueSVMFree takes an array of cl.SVMAllocation, got ${show(value)}`);
}

/**
 * An in-order command queue. Waiting (`finish`, `event.wait`, `readBuffer`) happens off the JS
 * thread, which stays free to run callbacks.
 * @example
 * import { cl } from "memlife";
 * using ctx = cl.createContext();
 * using buf = ctx.createBuffer(12);
 * using queue = ctx.createCommandQueue();
 * await queue.writeBuffer(buf, new Float32Array([1, 2, 3]));
 * const back = await queue.readBuffer(buf, new Float32Array(3));
 */
export class CommandQueue {
  #handle: Pointer | null;
  /** The native queue, kept after the program's last release() for [callbackQueue]. */
  readonly #native: Pointer;
  /** The program's references (the create and each retain()), each dropped by one release(). */
  #refs = 1;
  /**
   * The mappings' references (one per mapping until its unmap), apart from the program's: a
   * release() past the program's own was taken from them, and the mapping could not unmap (its
   * allocation was in use for good).
   */
  #held = 0;
  /** What the native release waits for: onFree callbacks done (async ones settled), finish() calls in progress. */
  #pending = new Set<Promise<unknown>>();
  /** onFree callbacks not called yet, for finish(). */
  #calls = new Set<Promise<void>>();
  /** Commands enqueued so far: each event carries its number (the queue is in order). */
  #seq = 0;
  /** Pins of commands not yet known to be complete, oldest first. */
  #pins: Pin[] = [];
  /** Waits in progress on this queue's events, and the newest command they cover. */
  #waits = 0;
  #waitMax = 0;
  #checkScheduled = false;
  /** Arms the driver refused in a row (see #retryCheck). */
  #armFailures = 0;
  readonly #context: Context;
  /** PoCL before 7.0: its commands that may fail, guarded (see FailureGuard); shared with [callbackQueue]'s. */
  #guard: FailureGuard | undefined;
  /** The newest command a wait or finish() saw complete, and finish() markers not yet ended (see `#waitList`). */
  #doneThrough = 0;
  #markersPending = 0;
  /** Read-only and not configurable (set in the constructor), as a context's `devices`. */
  declare readonly device: Device;
  /** On PoCL's basic driver: waits only for events already complete, or its own commands (see `basicDriver`). */
  #basic = false;

  /** The context it belongs to. */
  get context(): Context {
    return this.#context;
  }

  /** @internal The context from the private field (see `contextOf`). */
  static [contextOf](queue: CommandQueue): Context {
    return queue.#context;
  }

  /** @internal use `ctx.createCommandQueue()`; `existing`: see [callbackQueue]. */
  constructor(made: typeof fromFactory, context: Context, device: Device, existing?: Pointer) {
    if (made !== fromFactory) notByNew("cl.CommandQueue", "ctx.createCommandQueue()");
    readOnly(this, "device", device); // before the native create: nothing after it may throw
    let handle: Pointer | null;
    if (existing !== undefined) {
      check("clRetainCommandQueue", opencl().symbols.clRetainCommandQueue(existing));
      handle = existing;
    } else {
      const create = opencl().symbols.clCreateCommandQueue;
      handle = create(cls.Context[handleOf](context), Device[handleOf](device), 0, errcode) as Pointer | null;
      if (handle === null) throw new OpenCLError("clCreateCommandQueue", errcode[0]);
    }
    this.#handle = handle;
    this.#native = handle;
    this.#context = context;
    this.#guard = guardsFailures(device) ? new FailureGuard() : undefined;
    this.#basic = basicDriver(device);
    cls.adopt(context); // through the class: [callbackQueue] may make one after the context got another prototype
    net.add(this);
  }

  /** @internal What the safety net registers (see `finalizerState`). */
  static [finalizerState](commandQueue: CommandQueue): { handle: Pointer; context: Context; refs: number } | undefined {
    if (commandQueue.#handle === null) return undefined;
    return {
      handle: commandQueue.#handle,
      context: commandQueue.#context,
      refs: commandQueue.#refs + commandQueue.#held,
    };
  }

  get alive(): boolean {
    return this.#handle !== null;
  }

  /** @internal Its own body, not a call of `handleOf`: one more call cost an SVM free 10 ns on Node. */
  #live(): Pointer {
    if (this.#handle === null) throw new ReleasedError("CommandQueue");
    return this.#handle;
  }

  /**
   * @internal The live handle through the class (see `handleOf`): what memlife calls on a queue it
   * holds (a mapping's, an armed callback's, a free's) goes through the class, whatever the queue's
   * prototype or own properties.
   */
  static [handleOf](queue: CommandQueue): Pointer {
    if (queue.#handle === null) throw new ReleasedError("CommandQueue");
    return queue.#handle;
  }

  /**
   * @internal The queue an `onFree` callback gets ("q is usable here"). Released by the program,
   * this object is not, but the native queue lives on (its release waits for the callback): the
   * callback gets a queue object holding a reference of its own, which the caller releases once
   * the callback is done.
   */
  static [callbackQueue](queue: CommandQueue): CommandQueue {
    if (queue.#handle !== null) return queue;
    const made = new CommandQueue(fromFactory, queue.#context, queue.device, queue.#native);
    made.#guard = queue.#guard; // one native queue, one order of commands
    return made;
  }

  /**
   * Checks that `buffer` is a buffer of this queue's context; its handle is taken later. Every
   * enqueue reads all its arguments (options, list elements, views: any getter runs then) before
   * it takes a native handle, so that a getter that releases what the call uses gives ReleasedError
   * instead of a freed handle in C (test/fixtures/robust-getters.ts).
   */
  #checkBuffer(buffer: Buffer): void {
    if (!Buffer[genuine](buffer)) throw new TypeError(`expected a cl.Buffer, got ${show(buffer)}`);
    if (Buffer[contextOf](buffer) !== this.#context) {
      throw new TypeError("the buffer belongs to another context than this queue");
    }
  }

  /**
   * Enqueues a non-blocking write of `data` into `buffer` at `offset`. `data` stays pinned until
   * the command completes: do not transfer its ArrayBuffer before then.
   */
  enqueueWriteBuffer(buffer: Buffer, data: ArrayBufferView, options?: TransferOptions): Event {
    this.#live();
    return this.#enqueueTransfer("clEnqueueWriteBuffer", buffer, data, transferOptions(options), "data");
  }

  /**
   * Enqueues a non-blocking read of `buffer` into `target` (pinned until the command completes: do
   * not transfer its ArrayBuffer before then).
   */
  enqueueReadBuffer(buffer: Buffer, target: ArrayBufferView, options?: TransferOptions): Event {
    this.#live();
    return this.#enqueueTransfer("clEnqueueReadBuffer", buffer, target, transferOptions(options), "target");
  }

  /** A non-blocking read or write: the host memory stays pinned until the command completed. */
  #enqueueTransfer(
    fn: "clEnqueueReadBuffer" | "clEnqueueWriteBuffer",
    buffer: Buffer,
    view: ArrayBufferView,
    { offset, waitFor }: { offset: number; waitFor: unknown },
    what: string,
  ): Event {
    this.#checkBuffer(buffer);
    const events = waitEvents(waitFor);
    // The allocation behind the view is asked once, below, which also refuses freed SVM memory.
    const bytes = memoryBytes(view, what, true, true);
    const host = view;
    const svm = withAllocationsBehind(undefined, host);
    checkRange(buffer, offset, bytes);
    const handle = this.#live();
    const mem = Buffer[commandHandle](buffer);
    const { count, list } = this.#waitList(events, fn);
    check(fn, opencl().symbols[fn](handle, mem, 0, offset, bytes, hostPointer(host, bytes), count, list, eventOut));
    const event = CommandQueue[newCommand](this);
    CommandQueue[pinCommand](this, event, svm, host);
    return event;
  }

  /** Writes `data` and resolves once it is in the buffer. */
  async writeBuffer(buffer: Buffer, data: ArrayBufferView, options?: TransferOptions): Promise<void> {
    const event = this.enqueueWriteBuffer(buffer, data, options);
    try {
      await event.wait();
    } finally {
      event.release();
    }
  }

  /** Reads the buffer into `target` (default: a new Uint8Array of the rest of the buffer) and resolves with it. */
  async readBuffer<T extends ArrayBufferView = Uint8Array>(
    buffer: Buffer,
    target?: T,
    options?: TransferOptions,
  ): Promise<T> {
    this.#live();
    const read = transferOptions(options);
    let into = target;
    if (into === undefined) {
      this.#checkBuffer(buffer);
      const size = Buffer[sizeOf](buffer);
      if (read.offset > size) {
        throw new RangeError(`offset ${read.offset} is past the end of a buffer of ${size} bytes`);
      }
      into = new Uint8Array(size - read.offset) as unknown as T;
    }
    const event = this.#enqueueTransfer("clEnqueueReadBuffer", buffer, into, read, "target");
    try {
      await event.wait();
    } finally {
      event.release();
    }
    return into;
  }

  /**
   * Frees SVM allocations in queue order (clEnqueueSVMFree). Each allocation is freed exactly once,
   * with or without `onFree`, and throws ReleasedError if used afterwards. The returned event's
   * `wait()` settles after the command completed and `onFree` ran. An allocation still mapped is
   * refused (CL_INVALID_OPERATION): unmap it first.
   */
  enqueueSVMFree(allocations: readonly SVMAllocation[], options?: SVMFreeOptions): Event {
    this.#live();
    if (!Array.isArray(allocations)) throw notAllocationList(allocations);
    // The usual call, one allocation and no options, in a front small enough for V8 to inline
    // into the caller with #freeOne (TurboFan inlines no function over 460 bytes of bytecode, and
    // this one with its options was larger).
    if (options === undefined) {
      const n = listLength(allocations, "enqueueSVMFree's allocations");
      return n === 1 ? this.#freeOne(allocations[0]) : this.#freeList(allocations, n, undefined, undefined);
    }
    return this.#freeWithOptions(allocations, options);
  }

  #freeWithOptions(allocations: readonly SVMAllocation[], options: SVMFreeOptions): Event {
    let onFree: SVMFreeCallback | undefined;
    let waitFor: unknown;
    {
      // options() + own() in one pass, by their rules (as createBuffer does): an options bag cost
      // Deno's free 66 ns of JS through them, 34 so (bench/js-cost.ts), in a call of ~75 ns of JS
      // that PoCL's idle workers, woken per command, turn into 2-3 times as much on 2 cores.
      const bag = plainObject(options, svmFreeKeys, "enqueueSVMFree options");
      for (const key in bag) {
        if (key !== "onFree" && key !== "waitFor" && Object.hasOwn(bag, key)) {
          throw unknownOption(key, svmFreeKeys, "enqueueSVMFree options");
        }
      }
      // Asked first, read second: an inherited getter (a patched Object.prototype) never runs. Each
      // key asked as `plainObject` says, written out per key (see there).
      const given = "onFree" in bag && (!("onFree" in Object.prototype) || Object.hasOwn(bag, "onFree"))
        ? bag.onFree
        : undefined;
      if (given !== undefined) onFree = callable<SVMFreeCallback>(given, "onFree", "(queue, allocations) => void");
      if ("waitFor" in bag && (!("waitFor" in Object.prototype) || Object.hasOwn(bag, "waitFor"))) {
        waitFor = bag.waitFor;
      }
    }
    const n = listLength(allocations, "enqueueSVMFree's allocations");
    // One allocation and nothing to call back or wait for, without the lists: 6 ns less of JS on
    // Node, 18 on Deno (bench/js-cost.ts), which PoCL's idle workers make 2-3 times as much on 2 cores.
    if (n === 1 && onFree === undefined && waitFor === undefined) return this.#freeOne(allocations[0]);
    return this.#freeList(allocations, n, onFree, waitFor);
  }

  /** `enqueueSVMFree` of `n` allocations, its options read. */
  #freeList(
    allocations: readonly SVMAllocation[],
    n: number,
    onFree: SVMFreeCallback | undefined,
    waitFor: unknown,
  ): Event {
    // Each element is read once, into `given`: an accessor could return another allocation on a
    // second read, one never checked (a mapped one, another context's).
    const given: SVMAllocation[] = new Array(n);
    for (let i = 0; i < n; i++) {
      const a = allocations[i];
      if (!SVMAllocation[genuine](a)) {
        throw new TypeError(`allocations[${i}] is not a cl.SVMAllocation, got ${show(a)}`);
      }
      given[i] = a;
    }
    const events = waitEvents(waitFor);
    // Every getter has run: what they may have released or mapped is checked from here on.
    const handle = this.#live();
    // A Set only pays for itself on long lists; the usual one or few compare pairwise.
    const seen = n > 8 ? new Set<SVMAllocation>() : undefined;
    for (let i = 0; i < n; i++) {
      const a = given[i];
      let twice = false;
      if (seen !== undefined) twice = seen.size === seen.add(a).size;
      else for (let j = 0; j < i && !twice; j++) twice = given[j] === a;
      if (twice) throw new TypeError(`allocations[${i}] appears twice: it would be freed twice`);
      refuseUnfreeable(this.#context, a, i);
      if (events.length === 0 && SVMAllocation[usesOf](a) !== 0 && this.#usedElsewhere(a)) {
        throw unfreeable(i, "elsewhere");
      }
    }
    const svmFree = clEnqueueSVMFree ??= optionalSymbol("clEnqueueSVMFree", "an OpenCL 2.0 platform");
    // Without onFree there is no callback to run inside the call: keep Deno's fast call.
    clEnqueueSVMFreeQuiet ??= opencl().unguarded.clEnqueueSVMFree;
    const { count, list } = this.#waitList(events, "clEnqueueSVMFree");
    const array = n > 0 ? scratchPointers(n) : null;
    for (let i = 0; i < n; i++) backend.writePointer(array!, i, SVMAllocation[svmPointer](given[i]));
    // Without onFree and without a wait list there is nothing to call back nor to watch: the driver
    // frees. A wait list can fail, and then PoCL frees nothing: memlife's callback frees instead.
    // So can a command before it in its in-order queue while a user event is open (PoCL fails
    // every command after a failed one): then it is watched too.
    const mayFail = count > 0 || userEventsOpen();
    if (onFree === undefined && !mayFail) {
      // The driver frees them all: they are the command's before the call, whatever throws after
      // it at the edge of the stack; given back when it did not happen (a leak where even that
      // runs out of stack: the safe side of a double free).
      let surrendered = 0;
      let status: number;
      // Cleared before anything that may throw: the scratch holds the previous enqueue's event.
      eventOut[0] = 0n;
      try {
        for (; surrendered < n; surrendered++) SVMAllocation[surrender](given[surrendered]);
        status = clEnqueueSVMFreeQuiet(handle, n, array, null, 0, count, list, eventOut) as number;
      } catch (error) {
        // The event it wrote shows that the call happened.
        if (eventOut[0] === 0n) throw reclaimAll(given, surrendered, error);
        status = OpenCLStatus.CL_SUCCESS;
      }
      if (status !== OpenCLStatus.CL_SUCCESS) reclaimAll(given, surrendered);
      check("clEnqueueSVMFree", status);
      return CommandQueue[newCommand](this, undefined, true);
    }
    const pointers = given.map((a) => SVMAllocation[svmPointer](a));
    const context = cls.Context[nativeHandle](this.#context);
    const { id, entry, outcome, called } = registerFree(this, context, given, pointers, onFree);
    let status: number;
    try {
      status = svmFree(handle, n, array, svmFreeTrampoline(), id, count, list, eventOut) as number;
    } catch (error) {
      // The edge of the stack: the call did not happen, or the callback it made on this thread ran
      // out of stack (Bun and Deno throw its exception here). Only plain reads and stores: a call
      // could throw again, and the allocations are still the program's.
      if (!entry.arrived) {
        entry.abandoned = true;
        throw error;
      }
      status = OpenCLStatus.CL_SUCCESS;
    }
    if (status !== OpenCLStatus.CL_SUCCESS) {
      entry.abandoned = true;
      abandonFree(id);
      check("clEnqueueSVMFree", status);
    }
    // Queued: the allocations are the command's, and its callback frees those counted here (all of
    // them, unless the edge of the stack stops this loop: the rest stay the program's).
    while (entry.surrendered < n) {
      SVMAllocation[surrender](given[entry.surrendered]);
      entry.surrendered++;
    }
    oweFree(id);
    // PoCL calls no free callback for a command that failed (its wait list, or a command before
    // it): the poll sees the failure, frees, and settles what waits (finish() waited for ever).
    if (mayFail) watchFailure(id, eventOut);
    // A free without onFree owes the program nothing: wait() and finish() wait for the command only.
    if (onFree === undefined) return CommandQueue[newCommand](this);
    // release() waits for the callbacks to be done, `async` ones included; finish() only for them
    // to be called, or an async onFree that awaits its queue's finish() would wait for itself.
    this.#track(outcome.done);
    this.#trackCall(called);
    return CommandQueue[newCommand](this, outcome);
  }

  /**
   * A command of another queue that memlife has not seen end uses `a`. clEnqueueSVMFree frees in
   * its own queue's order only: without a wait list the driver freed at once, under that command
   * (a kernel behind a closed gate on another queue then wrote into the freed memory: SIGSEGV on
   * every runtime, test/fixtures/svm-free-other-queue.ts). A wait list is the program's say that
   * the free comes after it, as the README asks; a command whose status says it ended uses nothing.
   * Asked only of an allocation that counts commands in flight (`usesOf`, checked by the caller).
   */
  #usedElsewhere(a: SVMAllocation): boolean {
    for (const queue of busy) {
      if (queue === this) continue;
      const pins = queue.#pins;
      for (let i = 0; i < pins.length; i++) {
        const svm = pins[i].svm;
        if (svm !== undefined && svm.includes(a) && !ended(pins[i], false)) return true;
      }
    }
    return false;
  }

  /** `enqueueSVMFree([a])`: the quiet path below for one allocation, by the same rules. */
  #freeOne(a: unknown): Event {
    if (!SVMAllocation[genuine](a)) throw new TypeError(`allocations[0] is not a cl.SVMAllocation, got ${show(a)}`);
    // It may fail behind a gate, and PoCL then frees nothing: watched (see #freeList).
    if (userEventsOpen()) return this.#freeList([a], 1, undefined, undefined);
    const handle = this.#live();
    refuseUnfreeable(this.#context, a, 0);
    // The count first, at the call: the usual free (nothing in flight) makes no call for it.
    if (SVMAllocation[usesOf](a) !== 0 && this.#usedElsewhere(a)) throw unfreeable(0, "elsewhere");
    const array = scratchPointers(1);
    backend.writePointer(array, 0, SVMAllocation[svmPointer](a));
    clEnqueueSVMFreeQuiet ??= opencl().unguarded.clEnqueueSVMFree;
    let surrendered = false;
    let status: number;
    eventOut[0] = 0n;
    try {
      SVMAllocation[surrender](a);
      surrendered = true;
      status = clEnqueueSVMFreeQuiet(handle, 1, array, null, 0, 0, null, eventOut) as number;
    } catch (error) {
      if (eventOut[0] === 0n) {
        if (surrendered) SVMAllocation[reclaim](a);
        throw error;
      }
      status = OpenCLStatus.CL_SUCCESS;
    }
    if (status !== OpenCLStatus.CL_SUCCESS) SVMAllocation[reclaim](a);
    check("clEnqueueSVMFree", status);
    return CommandQueue[newCommand](this, undefined, true);
  }

  /**
   * Runs `kernel` over `globalSize` work items (1 to 3 dimensions), with its arguments as they are
   * now. What the command uses stays alive until it completes: OpenCL keeps the kernel, its
   * program and buffers; memlife keeps SVM allocations (arguments and `setSVMPointers`), whose
   * `release()` waits for the command.
   * @example
   * const done = queue.enqueueNDRangeKernel(kernel, [1024], { local: [64] });
   * await done.wait();
   */
  enqueueNDRangeKernel(kernel: Kernel, globalSize: readonly number[], options?: NDRangeOptions): Event {
    this.#live();
    if (!Kernel[genuine](kernel)) throw new TypeError("enqueueNDRangeKernel takes a cl.Kernel");
    if (Kernel[contextOf](kernel) !== this.#context) {
      throw new TypeError("the kernel belongs to another context than this queue");
    }
    Kernel[handleOf](kernel);
    const bag = checkOptions(options, ndrangeKeys, "enqueueNDRangeKernel options");
    const local = own(bag, "local") as number[] | undefined;
    const offset = own(bag, "offset") as number[] | undefined;
    const events = waitEvents(own(bag, "waitFor"));
    // ndrangeSizes reads every size (a getter may run, even one that enqueues a kernel) before it
    // fills the shared scratch they go down in; after it, no code of the program's runs.
    const sizes = ndrangeSizes(globalSize, local, offset);
    Kernel[executableOn](kernel, this.device);
    Kernel[localMemoryFits](kernel, this.device);
    const handle = this.#live();
    const k = Kernel[handleOf](kernel);
    const svm = Kernel[commandUses](kernel);
    const { count, list } = this.#waitList(events, "clEnqueueNDRangeKernel");
    check(
      "clEnqueueNDRangeKernel",
      opencl().symbols.clEnqueueNDRangeKernel(
        handle,
        k,
        sizes.dim,
        sizes.offset,
        sizes.global,
        sizes.local,
        count,
        list,
        eventOut,
      ),
    );
    const event = CommandQueue[newCommand](this);
    if (svm !== undefined) CommandQueue[pinCommand](this, event, svm, undefined);
    return event;
  }

  /**
   * Copies bytes between SVM allocations and host memory (clEnqueueSVMMemcpy, non-blocking).
   * Either side may be an ArrayBufferView, pinned until the copy completed.
   */
  enqueueSVMMemcpy(
    dst: SVMAllocation | ArrayBufferView,
    src: SVMAllocation | ArrayBufferView,
    options?: SVMCopyOptions,
  ): Event {
    this.#live();
    const bag = checkOptions(options, svmCopyKeys, "enqueueSVMMemcpy options");
    const srcOffset = sizeOr(own(bag, "srcOffset"), "srcOffset", 0);
    const dstOffset = sizeOr(own(bag, "dstOffset"), "dstOffset", 0);
    const givenSize = own(bag, "size");
    const events = waitEvents(own(bag, "waitFor"));
    const dLength = this.#svmSide(dst, "dst");
    const sLength = this.#svmSide(src, "src");
    const size = sizeOr(givenSize, "size", Math.max(sLength - srcOffset, 0));
    if (size === 0) throw new RangeError("enqueueSVMMemcpy: nothing to copy (size 0)");
    if (srcOffset + size > sLength) {
      throw new RangeError(`${size} bytes at srcOffset ${srcOffset} do not fit in src (${sLength} bytes)`);
    }
    if (dstOffset + size > dLength) {
      throw new RangeError(`${size} bytes at dstOffset ${dstOffset} do not fit in dst (${dLength} bytes)`);
    }
    const d = svmSidePointer(dst, dstOffset, dLength);
    const s = svmSidePointer(src, srcOffset, sLength);
    // What the command pins, found before it is enqueued (see withAllocationsBehind).
    const dstSVM = SVMAllocation[genuine](dst), srcSVM = SVMAllocation[genuine](src);
    const host = dstSVM ? (srcSVM ? undefined : src) : srcSVM ? dst : [dst, src];
    let svm: SVMAllocation[] | undefined = dstSVM ? (srcSVM ? [dst, src] : [dst]) : srcSVM ? [src] : undefined;
    if (host !== undefined) svm = withAllocationsBehind(svm, host as ArrayBufferView | ArrayBufferView[]);
    const handle = this.#live();
    const { count, list } = this.#waitList(events, "clEnqueueSVMMemcpy");
    const memcpy = clEnqueueSVMMemcpy ??= optionalSymbol("clEnqueueSVMMemcpy", "an OpenCL 2.0 platform");
    check("clEnqueueSVMMemcpy", memcpy(handle, 0, d, s, size, count, list, eventOut) as number);
    const event = CommandQueue[newCommand](this);
    CommandQueue[pinCommand](this, event, svm, host);
    return event;
  }

  /** One side of an SVM memcpy, checked: its length in bytes. */
  #svmSide(x: unknown, what: string): number {
    if (SVMAllocation[genuine](x)) {
      if (SVMAllocation[contextOf](x) !== this.#context) {
        throw new TypeError(`${what} belongs to another context than this queue`);
      }
      SVMAllocation[svmPointer](x); // ReleasedError
      return SVMAllocation[svmSize](x);
    }
    if (ArrayBuffer.isView(x)) {
      const length = memoryBytes(x, what, true);
      if (length === 0) throw new RangeError(`${what} is empty`);
      return length;
    }
    throw new TypeError(`${what} must be a cl.SVMAllocation or an ArrayBufferView`);
  }

  /**
   * Fills an SVM range with a repeated pattern (clEnqueueSVMMemFill): a typed value such as
   * `cl.float(1)` or an ArrayBufferView of 1, 2, 4, ..., 128 bytes; offset and size are multiples of it.
   */
  enqueueSVMMemFill(allocation: SVMAllocation, pattern: TypedValue | ArrayBufferView, options?: RangeOptions): Event {
    this.#live();
    if (!SVMAllocation[genuine](allocation)) throw new TypeError("enqueueSVMMemFill takes a cl.SVMAllocation");
    if (SVMAllocation[contextOf](allocation) !== this.#context) {
      throw new TypeError("the allocation belongs to another context than this queue");
    }
    const { offset, size: given, waitFor } = fillOptions(options, "enqueueSVMMemFill");
    const events = waitEvents(waitFor);
    const { bytes, length } = patternBytes(pattern);
    const size = fillSize(offset, given, SVMAllocation[svmSize](allocation), length, "enqueueSVMMemFill");
    const handle = this.#live();
    const pointer = offsetPointer(SVMAllocation[svmPointer](allocation), offset);
    const { count, list } = this.#waitList(events, "clEnqueueSVMMemFill");
    const fill = clEnqueueSVMMemFill ??= optionalSymbol("clEnqueueSVMMemFill", "an OpenCL 2.0 platform");
    check(
      "clEnqueueSVMMemFill",
      fill(
        handle,
        pointer,
        bytes,
        length,
        size,
        count,
        list,
        eventOut,
      ) as number,
    );
    const event = CommandQueue[newCommand](this);
    CommandQueue[pinCommand](this, event, [allocation], undefined);
    return event;
  }

  /**
   * Maps an SVM range for the host (clEnqueueSVMMap, non-blocking): the only host access to
   * coarse-grain SVM. Its `arrayBuffer` is valid once `mapping.event` completed; `unmap()` hands
   * the range back. The allocation's `release()` waits for the unmap.
   */
  enqueueSVMMap(allocation: SVMAllocation, options?: SVMMapOptions): SVMMapping {
    this.#live();
    if (!SVMAllocation[genuine](allocation)) throw new TypeError("enqueueSVMMap takes a cl.SVMAllocation");
    if (SVMAllocation[contextOf](allocation) !== this.#context) {
      throw new TypeError("the allocation belongs to another context than this queue");
    }
    const bag = checkOptions(options, svmMapKeys, "enqueueSVMMap options");
    const flags = member(mapFlags, own(bag, "access"), "access", mapFlags.read_write);
    const offset = sizeOr(own(bag, "offset"), "offset", 0);
    const allocationSize = SVMAllocation[svmSize](allocation);
    if (offset >= allocationSize) {
      throw new RangeError(`offset ${offset} is outside the allocation (${allocationSize} bytes)`);
    }
    const size = sizeOr(own(bag, "size"), "size", allocationSize - offset);
    if (size === 0 || offset + size > allocationSize) {
      throw new RangeError(`${size} bytes at offset ${offset} do not fit in the allocation (${allocationSize} bytes)`);
    }
    const events = waitEvents(own(bag, "waitFor"));
    const handle = this.#live();
    const pointer = offsetPointer(SVMAllocation[svmPointer](allocation), offset);
    const { count, list } = this.#waitList(events, "clEnqueueSVMMap");
    const map = clEnqueueSVMMap ??= optionalSymbol("clEnqueueSVMMap", "an OpenCL 2.0 platform");
    check("clEnqueueSVMMap", map(handle, 0, flags, pointer, size, count, list, eventOut) as number);
    const event = CommandQueue[newCommand](this);
    // Counts as a use until the unmap completes (see SVMMapping.unmap).
    SVMAllocation[useSVM](allocation);
    mappedCount.set(allocation, (mappedCount.get(allocation) ?? 0) + 1);
    anyMapped = true;
    return new SVMMapping(fromFactory, this, allocation, pointer, offset, size, event);
  }

  /** `enqueueSVMMap`, resolved once the range is mapped (the map event is released). */
  async mapSVM(allocation: SVMAllocation, options?: SVMMapOptions): Promise<SVMMapping> {
    const mapping = this.enqueueSVMMap(allocation, options);
    try {
      await mapping.event.wait();
    } catch (error) {
      mapping.unmap().release();
      throw error;
    } finally {
      mapping.event.release();
    }
    return mapping;
  }

  /** Copies between buffers (clEnqueueCopyBuffer). */
  enqueueCopyBuffer(src: Buffer, dst: Buffer, options?: CopyBufferOptions): Event {
    this.#live();
    this.#checkBuffer(src);
    this.#checkBuffer(dst);
    const bag = checkOptions(options, copyBufferKeys, "enqueueCopyBuffer options");
    const srcOffset = sizeOr(own(bag, "srcOffset"), "srcOffset", 0);
    const dstOffset = sizeOr(own(bag, "dstOffset"), "dstOffset", 0);
    const size = sizeOr(own(bag, "size"), "size", Math.max(Buffer[sizeOf](src) - srcOffset, 0));
    if (size === 0) throw new RangeError("enqueueCopyBuffer: nothing to copy (size 0)");
    checkRange(src, srcOffset, size);
    checkRange(dst, dstOffset, size);
    const events = waitEvents(own(bag, "waitFor"));
    const handle = this.#live();
    const s = Buffer[commandHandle](src);
    const d = Buffer[commandHandle](dst);
    const { count, list } = this.#waitList(events, "clEnqueueCopyBuffer");
    check(
      "clEnqueueCopyBuffer",
      opencl().symbols.clEnqueueCopyBuffer(handle, s, d, srcOffset, dstOffset, size, count, list, eventOut),
    );
    return CommandQueue[newCommand](this);
  }

  /** Fills a buffer range with a repeated pattern (clEnqueueFillBuffer); see `enqueueSVMMemFill`. */
  enqueueFillBuffer(buffer: Buffer, pattern: TypedValue | ArrayBufferView, options?: RangeOptions): Event {
    this.#live();
    this.#checkBuffer(buffer);
    const { offset, size: given, waitFor } = fillOptions(options, "enqueueFillBuffer");
    const events = waitEvents(waitFor);
    const { bytes, length } = patternBytes(pattern);
    const size = fillSize(offset, given, Buffer[sizeOf](buffer), length, "enqueueFillBuffer");
    const handle = this.#live();
    const mem = Buffer[commandHandle](buffer);
    const { count, list } = this.#waitList(events, "clEnqueueFillBuffer");
    const fill = optionalSymbol("clEnqueueFillBuffer", "an OpenCL 1.2 platform");
    check(
      "clEnqueueFillBuffer",
      fill(handle, mem, bytes, length, offset, size, count, list, eventOut) as number,
    );
    return CommandQueue[newCommand](this);
  }

  /** An event that completes when `waitFor` (default: every command enqueued before) completed. */
  enqueueMarker(options?: { waitFor?: readonly Event[] }): Event {
    this.#live();
    const events = waitEvents(own(checkOptions(options, waitForKeys, "enqueueMarker options"), "waitFor"));
    const handle = this.#live();
    const { count, list } = this.#waitList(events, "clEnqueueMarkerWithWaitList");
    const marker = optionalSymbol("clEnqueueMarkerWithWaitList", "an OpenCL 1.2 platform");
    check("clEnqueueMarkerWithWaitList", marker(handle, count, list, eventOut) as number);
    return CommandQueue[newCommand](this);
  }

  /** Like `enqueueMarker`, and later commands wait for it too (matters on out-of-order queues). */
  enqueueBarrier(options?: { waitFor?: readonly Event[] }): Event {
    this.#live();
    const events = waitEvents(own(checkOptions(options, waitForKeys, "enqueueBarrier options"), "waitFor"));
    const handle = this.#live();
    const { count, list } = this.#waitList(events, "clEnqueueBarrierWithWaitList");
    const barrier = optionalSymbol("clEnqueueBarrierWithWaitList", "an OpenCL 1.2 platform");
    check("clEnqueueBarrierWithWaitList", barrier(handle, count, list, eventOut) as number);
    return CommandQueue[newCommand](this);
  }

  /**
   * `waitHandles` for a command about to be enqueued here. On PoCL, a wait list that holds an open
   * user event (or a guarded command) on a queue with nothing guarded yet first gets a marker in
   * front of it, which stands for the commands before it (see FailureGuard).
   */
  #waitList(events: readonly Event[], fn: string): { count: number; list: BigUint64Array | null } {
    const wait = waitHandles(events, fn, this.#basic ? this.#native : null);
    const guard = this.#guard;
    // Not when every command before it is known to have ended (a new queue, or one whose last
    // command was waited for): the command then waits on none of them, and a marker just enqueued,
    // ending on a driver thread as the program fails the gate, is what PoCL's other bug needs (a
    // failed command also run: README, Measured facts; a queue per gate aborted 2 stress runs of 3).
    if (
      guard !== undefined && guard.entries.length === 0 && gatedWaitPending() &&
      (this.#seq !== this.#doneThrough || this.#markersPending !== 0)
    ) {
      const s = opencl().symbols;
      try {
        if (s.clEnqueueMarkerWithWaitList?.(this.#live(), 0, null, eventOut) === OpenCLStatus.CL_SUCCESS) {
          guardMarker(guard, backend.readPointer(eventOut, 0) as Pointer, this.#context);
        }
      } catch {
        // At the edge of the stack: the command goes on without its marker (which may leak).
      }
    }
    return wait;
  }

  /** @internal `#waitList` for a mapping's unmap. */
  static [waitListOf](
    queue: CommandQueue,
    events: readonly Event[],
    fn: string,
  ): { count: number; list: BigUint64Array | null } {
    return queue.#waitList(events, fn);
  }

  /**
   * @internal Wraps the cl_event the enqueue call just wrote, numbered for completion tracking;
   * `quiet` when its release can call nothing back (see Event's `#quiet`).
   */
  static [newCommand](queue: CommandQueue, after?: CallbackOutcome, quiet = false): Event {
    const seq = ++queue.#seq;
    const handle = backend.readPointer(eventOut, 0) as Pointer;
    // On PoCL, guarded when it may fail with a user event (see FailureGuard).
    commandMade(queue.#guard, handle, queue.#context);
    return new Event(
      fromFactory,
      handle,
      queue.#context,
      after,
      queue.#tracker,
      seq,
      quiet,
    );
  }

  /**
   * @internal Keeps what `event`'s command uses alive until it completed: `svm` counted as used,
   * `host` reachable. Completion is learnt for free from `wait()` and `finish()`; only when none
   * covers the command does the queue arm a completion callback (a driver-thread callback costs
   * the JS thread, and on Deno and Node the driver thread, ~15 us).
   */
  static [pinCommand](queue: CommandQueue, event: Event, svm: SVMAllocation[] | undefined, host: unknown): void {
    const seq = queue.#seq;
    // The pin first: whatever throws after it, the host memory and the allocations stay reachable.
    const pin: Pin = { seq, svm, host, event: null, armed: false };
    if (queue.#pins.push(pin) === 1) busy.add(queue);
    if (svm !== undefined) { for (let i = 0; i < svm.length; i++) SVMAllocation[useSVM](svm[i]); }
    const s = opencl().symbols;
    const handle = Event[handleOf](event);
    // The command is enqueued whatever happens here: the program must get its event (a throw would
    // have it enqueue the command again). Without a reference of its own to the command's event,
    // the pin takes a marker enqueued now, which ends once the command did (it waits on nothing
    // else); without that either, the pin trusts the queue's order (see `ended`).
    if (s.clRetainEvent(handle) === OpenCLStatus.CL_SUCCESS) pin.event = handle;
    else {
      const marker = optionalSymbol("clEnqueueMarkerWithWaitList", "an OpenCL 1.2 platform");
      if (marker(CommandQueue[handleOf](queue), 0, null, eventOut) === OpenCLStatus.CL_SUCCESS) {
        pin.event = backend.readPointer(eventOut, 0);
      }
    }
    queue.#scheduleCheck();
  }

  /**
   * @internal Every command up to number `seq` completed (or, `known` false, may not have). Static:
   * a queue given another prototype had an armed callback throw TypeError (uncaught) and a wait
   * reject with it.
   */
  static [completedThrough](queue: CommandQueue, seq: number, known: boolean): void {
    const pins = queue.#pins;
    let kept = 0;
    let i = 0;
    for (; i < pins.length && pins[i].seq <= seq; i++) {
      const pin = pins[i];
      if (!ended(pin, known)) {
        pins[kept++] = pin;
        continue;
      }
      const svm = pin.svm;
      if (svm !== undefined) { for (let j = 0; j < svm.length; j++) SVMAllocation[unuseSVM](svm[j]); }
      if (pin.event !== null) opencl().symbols.clReleaseEvent(pin.event);
    }
    if (kept !== i) {
      pins.copyWithin(kept, i);
      pins.length -= i - kept;
      if (pins.length === 0) busy.delete(queue);
    }
    if (pins.length > 0) queue.#scheduleCheck();
  }

  /** Whether a pinned command up to number `seq` is not known to have ended. */
  #pinnedThrough(seq: number): boolean {
    return this.#pins.length > 0 && this.#pins[0].seq <= seq;
  }

  /** The queue as the events of its commands see it. */
  #tracker: CommandTracker = {
    waitStarted: (seq) => {
      this.#waits++;
      if (seq > this.#waitMax) this.#waitMax = seq;
    },
    waitEnded: (seq, completed) => {
      if (--this.#waits === 0) this.#waitMax = 0;
      if (completed && seq > this.#doneThrough) this.#doneThrough = seq;
      CommandQueue[completedThrough](this, seq, completed);
    },
    open: () => this.#handle !== null,
    flush: () => {
      // A released queue was flushed by its release (clReleaseCommandQueue flushes).
      if (this.#handle !== null) check("clFlush", opencl().symbols.clFlush(this.#handle));
    },
  };

  #scheduleCheck(delay = ARM_AFTER_MS): void {
    if (this.#checkScheduled) return;
    // Marked once setTimeout returned: at the edge of the stack it may throw (see callbacks.ts `schedule`).
    const made = timer(this.#check, delay);
    this.#checkScheduled = true;
    // A retry holds nothing: a wait, finish() or a later command completes the pins meanwhile.
    if (delay !== ARM_AFTER_MS) backend.unrefTimer(made);
  }

  /** The driver could not arm (out of resources): again later, less and less often. */
  #retryCheck(): void {
    this.#armFailures++;
    this.#scheduleCheck(Math.min(1000, ARM_AFTER_MS << Math.min(10, this.#armFailures)));
  }

  /** Arms a completion callback on the newest pinned command, unless a wait in progress covers it. */
  #check = (): void => {
    this.#checkScheduled = false;
    const pins = this.#pins;
    if (pins.length === 0) return;
    const pin = pins[pins.length - 1];
    // That wait's end prunes, and checks again.
    if (this.#waits > 0 && this.#waitMax >= pin.seq) return;
    const handle = pin.event;
    if (pin.armed || handle === null) return;
    // The armed entry's own reference: the pin's may go first, through a wait.
    if (opencl().symbols.clRetainEvent(handle) !== OpenCLStatus.CL_SUCCESS) return this.#retryCheck();
    const id = armed.add({ queue: this, pin, handle, address: backend.address(handle), completed: false });
    // In a Worker the callback holds the event loop until it came: a Worker that ended before
    // had the driver thread call into its gone isolate (SIGABRT on Node). The main thread needs
    // no hold: its end is memlife's _exit (README, Exit), and a command that never completes
    // (gated on a user event never set) must not keep the program alive.
    if (inWorker) owe();
    const status = opencl().symbols.clSetEventCallback(
      handle,
      ExecutionStatus.COMPLETE,
      completedTrampoline(),
      id,
    ) as number;
    if (status !== OpenCLStatus.CL_SUCCESS) {
      // No caller to tell (a timer runs this): the queue tries again.
      armed.delete(id);
      if (inWorker) paid();
      opencl().symbols.clReleaseEvent(handle);
      return this.#retryCheck();
    }
    this.#armFailures = 0;
    pin.armed = true;
    armedPoll.start();
  };

  #track(work: Promise<unknown>): void {
    const pending = this.#pending;
    pending.add(work);
    const forget = () => void pending.delete(work);
    work.then(forget, forget);
  }

  #trackCall(call: Promise<void>): void {
    const calls = this.#calls;
    calls.add(call);
    void call.then(() => calls.delete(call));
  }

  /** Issues the queued commands (clFlush). */
  flush(): void {
    check("clFlush", opencl().symbols.clFlush(this.#live()));
  }

  /**
   * Resolves once every queued command completed and their callbacks (`onFree`) were called. An
   * `async` onFree's promise is not waited for here (its free's `wait()` waits for it, and
   * `release()` does): an onFree may itself await its queue's `finish()`.
   */
  async finish(): Promise<void> {
    const handle = this.#live();
    const upTo = this.#seq;
    const s = opencl().symbols;
    if (s.clEnqueueMarkerWithWaitList !== undefined) {
      // A marker with no wait list ends once every command before it did, and its completion
      // callback says so without holding a thread (see `markerEnded`). A clFinish on a thread held
      // one of the runtime's few threads for async calls while it waited: finish() of queues behind
      // closed user events, past Node's 4, Deno's 32 and Bun's 256, held up every later async call
      // (test/fixtures/async-gated-waits.ts "finish").
      check("clEnqueueMarkerWithWaitList", s.clEnqueueMarkerWithWaitList(handle, 0, null, eventOut) as number);
      const marker = backend.readPointer(eventOut, 0) as Pointer;
      // In its queue's guarded order as any command (see FailureGuard): later ones may wait on it.
      // (Nothing in it throws: the marker must reach markerEnded, or it would never be released.)
      if (this.#guard !== undefined) commandMade(this.#guard, marker, this.#context);
      const ended = this.#markerEnded(handle, marker, upTo);
      // Not needed for the queue's sake (the marker's cl_event holds it), but release()'s promise:
      // the native release waits for a finish() in progress, and for its clFinish. At the edge of
      // the stack the tracking may throw: `ended` is awaited all the same, or its rejection went
      // unhandled (Deno, in a CI run: an uncaught RangeError; test/fixtures/stack-limit.ts "finish").
      try {
        this.#track(ended);
      } catch {
        // A release() meanwhile then does not wait for this finish(): the marker holds the queue.
      }
      this.#markersPending++;
      try {
        await ended;
      } finally {
        this.#markersPending--;
      }
    } else await this.#finishOnThread(handle, upTo, true); // an OpenCL 1.1 library
    while (this.#calls.size > 0) await Promise.all([...this.#calls]);
  }

  /**
   * finish()'s wait on its `marker`. A failed marker does not say that the commands before the one
   * that failed ended: finish() resolved while one of them was still queued, and the pins of a
   * failed command whose armed callback PoCL never calls were kept until a later finish() (a
   * hostile pass, all three runtimes; test/robust-async.spec.ts "finish() and failed commands").
   * Nor does a marker that completed where a command before it failed: PoCL then runs what follows
   * while a command before the failed one is still queued. A pin left up to the marker shows that
   * (see `ended`); commands that pin nothing cannot tell. clFinish does say it, at the cost of a
   * thread, only after a failure. Its status is not finish()'s: NVIDIA's clFinish returns a failed
   * command's status (CL_OUT_OF_RESOURCES after a user event failed with -5), PoCL's CL_SUCCESS,
   * and finish() resolves on every driver once the commands ended, failed or not.
   */
  async #markerEnded(handle: Pointer, marker: Pointer, upTo: number): Promise<void> {
    const onThread = () => this.#finishOnThread(handle, upTo, false);
    await markerEnded(marker, this.#context, this.#tracker, upTo, onThread);
    if (this.#pinnedThrough(upTo)) await onThread();
  }

  /**
   * clFinish on one of the runtime's threads: every command up to `upTo` ended once it returned.
   * A failed status rejects when `checked`.
   */
  async #finishOnThread(handle: Pointer, upTo: number, checked: boolean): Promise<void> {
    this.#tracker.waitStarted(upTo);
    const call = opencl().async.clFinish(handle) as Promise<number>;
    // release() waits for it: the queue must not be released under a clFinish still running.
    this.#track(call);
    let status: number | undefined;
    try {
      status = await call;
    } finally {
      this.#tracker.waitEnded(upTo, status === OpenCLStatus.CL_SUCCESS);
    }
    if (checked) check("clFinish", status);
  }

  /** CL_QUEUE_REFERENCE_COUNT (stale at once: for debugging). */
  get referenceCount(): number {
    return infoU64(
      "clGetCommandQueueInfo",
      opencl().symbols.clGetCommandQueueInfo,
      this.#live(),
      QueueInfo.REFERENCE_COUNT,
      4,
    );
  }

  retain(): this {
    CommandQueue[retainOf](this, false);
    return this;
  }

  /** @internal `retain()` through the class: a mapping's reference unless `mapping` is false. */
  static [retainOf](queue: CommandQueue, mapping = true): void {
    check("clRetainCommandQueue", opencl().symbols.clRetainCommandQueue(CommandQueue[handleOf](queue)));
    if (mapping) queue.#held++;
    else queue.#refs++;
    net.renew(queue);
  }

  /**
   * Drops a reference. The native release waits for callbacks this queue still owes and then runs
   * off the JS thread (OpenCL may finish the queue inside it, which can wait on callback threads).
   */
  release(): void {
    CommandQueue[releaseOf](this, false);
  }

  /**
   * @internal `release()` through the class (see `retainOf`): a mapping's reference unless
   * `mapping` is false. One with none left to drop does nothing.
   */
  static [releaseOf](queue: CommandQueue, mapping = true): void {
    const handle = queue.#handle;
    if (handle === null) return;
    if (mapping) {
      if (queue.#held === 0) return;
      queue.#held--;
    } else {
      if (queue.#refs === 0) return;
      queue.#refs--;
    }
    const last = queue.#refs === 0 && queue.#held === 0;
    if (last) {
      queue.#handle = null;
      net.remove(queue);
    } else net.renew(queue);
    // Only the last reference's release ends the queue as a child of its context.
    const context = last ? queue.#context : null;
    const nativeRelease = () => releaseQueue(handle, context);
    if (queue.#pending.size === 0) nativeRelease();
    else void Promise.allSettled([...queue.#pending]).then(nativeRelease);
  }

  [Symbol.dispose](): void {
    this.release();
  }

  /** The raw cl_command_queue. Unsafe: invalid after release. */
  get unsafeHandle(): Pointer {
    return this.#live();
  }

  static {
    closeStatics(this);
  }
}

// Other modules reach queues through the class (see classes.ts).
register("CommandQueue", CommandQueue);

/** The address `offset` bytes into one side of an SVM memcpy that `#svmSide` checked (`length` bytes). */
function svmSidePointer(x: SVMAllocation | ArrayBufferView, offset: number, length: number): Pointer {
  const base = SVMAllocation[genuine](x) ? SVMAllocation[svmPointer](x) : backend.pointerOf(x);
  return offsetPointer(base, Math.min(offset, length));
}

/**
 * A fill pattern's bytes and their number: 1, 2, 4, ..., 128 (OpenCL's rule). Looked at after the
 * options' getters ran, which may detach or resize it.
 */
function patternBytes(pattern: TypedValue | ArrayBufferView): { bytes: ArrayBufferView; length: number } {
  let bytes: ArrayBufferView;
  let length: number;
  if (pattern instanceof TypedValue) {
    // Checked as any view: an object made with TypedValue's prototype can hold any `bytes`.
    bytes = pattern.bytes;
    length = memoryBytes(bytes, "pattern", true);
  } else if (ArrayBuffer.isView(pattern)) {
    length = memoryBytes(pattern, "pattern", true);
    bytes = pattern;
  } else throw new TypeError("a fill pattern is a typed value such as cl.float(0) or an ArrayBufferView");
  if (length === 0 || length > 128 || (length & (length - 1)) !== 0) {
    throw new RangeError(`a fill pattern has 1, 2, 4, 8, 16, 32, 64 or 128 bytes, got ${length}`);
  }
  return { bytes, length };
}

/** A fill's options, each read once. */
function fillOptions(
  options: RangeOptions | undefined,
  where: string,
): { offset: number; size: unknown; waitFor: unknown } {
  const bag = checkOptions(options, rangeKeys, `${where} options`);
  return { offset: sizeOr(own(bag, "offset"), "offset", 0), size: own(bag, "size"), waitFor: own(bag, "waitFor") };
}

/** The bytes a fill covers: `size` (default: the rest after `offset`), checked against `total` and the pattern. */
function fillSize(offset: number, given: unknown, total: number, unit: number, where: string): number {
  const size = sizeOr(given, "size", Math.max(total - offset, 0));
  if (size === 0) throw new RangeError(`${where}: nothing to fill (size 0)`);
  if (offset % unit !== 0 || size % unit !== 0) {
    throw new RangeError(
      `${where}: offset (${offset}) and size (${size}) must be multiples of the pattern size (${unit})`,
    );
  }
  if (offset + size > total) {
    throw new RangeError(`${where}: ${size} bytes at offset ${offset} do not fit in ${total} bytes`);
  }
  return size;
}

/**
 * The first `surrendered` allocations of a free command that did not happen are the program's
 * again. Returns `error` for the caller to throw.
 */
/** Throws unless `queue`'s free may take `a` (allocations[i]): this context's, live, not mapped, not a buffer's memory. */
function refuseUnfreeable(context: Context, a: SVMAllocation, i: number): void {
  if (SVMAllocation[contextOf](a) !== context) throw unfreeable(i, "context");
  SVMAllocation[svmPointer](a); // ReleasedError if already freed
  // No lookup until an allocation was ever mapped: a WeakMap lookup of a fresh allocation costs
  // V8 7 ns, which PoCL's idle workers make 2-3 times as much on 2 cores.
  if (anyMapped && mappedCount.has(a)) throw unfreeable(i, "mapped");
  if (heldByBuffer(a)) throw unfreeable(i, "held");
}

/**
 * What `refuseUnfreeable` throws, made out of line: inlined with the messages (193 bytes of
 * bytecode, 119 without), it used up V8's inlining budget of a free's caller, which then made the
 * free's `new Event` through the generic construct stub (`--trace-turbo-inlining`).
 */
function unfreeable(i: number, why: "context" | "mapped" | "held" | "elsewhere"): Error {
  return why === "context"
    ? new TypeError(`allocations[${i}] belongs to another context than this queue`)
    : new OpenCLError(
      "clEnqueueSVMFree",
      OpenCLStatus.CL_INVALID_OPERATION,
      why === "mapped"
        ? `allocations[${i}] is mapped: unmap() it first (a mapping holds its allocation until the unmap completed)`
        : why === "held"
        ? `allocations[${i}] is the memory of a hostPtr "use" buffer: release that buffer first (its memory is the allocation's until its destructor ran)`
        : `allocations[${i}] is used by a command of another queue that has not ended: give that command's event as waitFor (a free waits for its own queue's commands only), or wait for it first`,
    );
}

function reclaimAll(given: SVMAllocation[], surrendered: number, error?: unknown): unknown {
  for (let i = 0; i < surrendered; i++) SVMAllocation[reclaim](given[i]);
  return error;
}
