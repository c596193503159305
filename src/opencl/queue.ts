/** Command queues: reads, writes, SVM frees, finish. Nothing here blocks the JS thread. */
import type { Pointer } from "../../ffi/types.ts";
import { inRegistry, reportCallbackError, SafetyNet } from "../callbacks.ts";
import { OpenCLError, ReleasedError } from "../errors.ts";
import { callable, integer, keys, memory, options as checkOptions, own, show } from "../check.ts";
import { QueueInfo } from "./constants.ts";
import { check, errcode, eventOut, infoU64, opencl, optionalSymbol, scratchPointers } from "./native.ts";
import { Buffer } from "./buffer.ts";
import { Event, eventFrom, waitList } from "./event.ts";
import { abandonFree, registerFree, SVMAllocation, type SVMFreeCallback, svmFreeTrampoline, watchFailure } from "./svm.ts";
import type { Context } from "./context.ts";
import type { Device } from "./platform.ts";

const net = new SafetyNet<{ handle: Pointer; context: Context }>(({ handle, context }) => releaseQueue(handle, context));

/**
 * The native release, off the JS thread (it may finish the queue). No caller can receive its
 * failure: it goes to `onCallbackError` (source "release").
 */
function releaseQueue(handle: Pointer, context: Context): void {
  opencl().async.clReleaseCommandQueue(handle).then(
    (status) => {
      context.disown();
      if (status !== 0) reportCallbackError(new OpenCLError("clReleaseCommandQueue", status as number), "release");
    },
    (error) => {
      context.disown();
      reportCallbackError(error, "release");
    },
  );
}

let clEnqueueSVMFree: ((...args: unknown[]) => unknown) | undefined;
let clEnqueueSVMFreeQuiet: ((...args: unknown[]) => unknown) | undefined;

export interface TransferOptions {
  /** Byte offset into the buffer (default 0). */
  offset?: number;
  /** Events that must complete first. */
  waitFor?: Event[];
}

export interface SVMFreeOptions {
  /**
   * Called on the JS thread once the free command ran, with this queue and the allocations in the
   * order given; memlife frees them with clSVMFree right after it returns (or throws). The queue
   * may be used inside it.
   */
  onFree?: SVMFreeCallback;
  waitFor?: Event[];
}

const transferKeys = keys("offset", "waitFor");
const svmFreeKeys = keys("onFree", "waitFor");

/**
 * A read or write of `view` at `options.offset` of `buffer`, checked: the offset is a size_t, the
 * bytes fit, and the view is memory native code may keep until the command completes.
 */
function transfer(buffer: Buffer, view: unknown, options: TransferOptions | undefined, what: string): { offset: number; host: ArrayBufferView; waitFor: unknown } {
  const bag = checkOptions(options, transferKeys, "transfer options");
  const host = memory(view, what, true);
  const given = own(bag, "offset");
  const offset = given === undefined ? 0 : integer(given, "size_t", "offset");
  if (offset + host.byteLength > buffer.size) {
    throw new RangeError(`${host.byteLength} bytes at offset ${offset} do not fit in a buffer of ${buffer.size} bytes`);
  }
  return { offset, host, waitFor: own(bag, "waitFor") };
}

/**
 * The pointer to pass for `view`. A zero-length transfer is valid in C, with a non-NULL pointer
 * (clEnqueueReadBuffer refuses a NULL one with CL_INVALID_VALUE), but an empty view goes down as
 * NULL on Deno and Node; one byte of memory of our own, never touched, stands in for it.
 */
function hostPointer(view: ArrayBufferView): ArrayBufferView {
  return view.byteLength === 0 ? noBytes : view;
}
const noBytes = new Uint8Array(new ArrayBuffer(8));

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
  #refs = 1;
  /** JS-side completions owed by this queue's commands (onFree callbacks). */
  #pending = new Set<Promise<unknown>>();
  readonly context: Context;
  readonly device: Device;
  [inRegistry] = false;

  /** @internal use `ctx.createCommandQueue()`. */
  constructor(context: Context, device: Device) {
    const handle = opencl().symbols.clCreateCommandQueue(context.handle(), device.unsafeHandle, 0, errcode) as Pointer | null;
    if (handle === null) throw new OpenCLError("clCreateCommandQueue", errcode[0]);
    this.#handle = handle;
    this.context = context;
    this.device = device;
    context.adopt();
    net.add(this, { handle, context });
  }

  get alive(): boolean {
    return this.#handle !== null;
  }

  /** @internal */
  handle(): Pointer {
    if (this.#handle === null) throw new ReleasedError("CommandQueue");
    return this.#handle;
  }

  #checkBuffer(buffer: Buffer): Pointer {
    if (!(buffer instanceof Buffer)) throw new TypeError(`expected a cl.Buffer, got ${show(buffer)}`);
    if (buffer.context !== this.context) throw new TypeError("the buffer belongs to another context than this queue");
    return buffer.commandHandle();
  }

  /**
   * Enqueues a non-blocking write of `data` into `buffer` at `offset`. `data` stays pinned until
   * the command completes: do not transfer its ArrayBuffer before then.
   */
  enqueueWriteBuffer(buffer: Buffer, data: ArrayBufferView, options?: TransferOptions): Event {
    const handle = this.handle();
    const mem = this.#checkBuffer(buffer);
    const { offset, host, waitFor } = transfer(buffer, data, options, "data");
    const { count, list } = waitList(waitFor);
    check("clEnqueueWriteBuffer", opencl().symbols.clEnqueueWriteBuffer(handle, mem, 0, offset, host.byteLength, hostPointer(host), count, list, eventOut));
    const event = eventFrom(eventOut, this.context);
    void event.completion(host); // `data` stays pinned until the command completed
    return event;
  }

  /**
   * Enqueues a non-blocking read of `buffer` into `target` (pinned until the command completes: do
   * not transfer its ArrayBuffer before then).
   */
  enqueueReadBuffer(buffer: Buffer, target: ArrayBufferView, options?: TransferOptions): Event {
    const handle = this.handle();
    const mem = this.#checkBuffer(buffer);
    const { offset, host, waitFor } = transfer(buffer, target, options, "target");
    const { count, list } = waitList(waitFor);
    check("clEnqueueReadBuffer", opencl().symbols.clEnqueueReadBuffer(handle, mem, 0, offset, host.byteLength, hostPointer(host), count, list, eventOut));
    const event = eventFrom(eventOut, this.context);
    void event.completion(host);
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
  async readBuffer<T extends ArrayBufferView = Uint8Array>(buffer: Buffer, target?: T, options?: TransferOptions): Promise<T> {
    let into = target;
    if (into === undefined) {
      this.handle();
      this.#checkBuffer(buffer);
      const given = own(checkOptions(options, transferKeys, "transfer options"), "offset");
      const offset = given === undefined ? 0 : integer(given, "size_t", "offset", 0, buffer.size);
      into = new Uint8Array(buffer.size - offset) as unknown as T;
    }
    const event = this.enqueueReadBuffer(buffer, into, options);
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
   * `wait()` settles after the command completed and `onFree` ran.
   */
  enqueueSVMFree(allocations: SVMAllocation[], options?: SVMFreeOptions): Event {
    const handle = this.handle();
    if (!Array.isArray(allocations)) throw new TypeError(`enqueueSVMFree takes an array of cl.SVMAllocation, got ${show(allocations)}`);
    let onFree: SVMFreeCallback | undefined;
    let waitFor: unknown;
    if (options !== undefined) {
      const bag = checkOptions(options, svmFreeKeys, "enqueueSVMFree options");
      const given = own(bag, "onFree");
      if (given !== undefined) onFree = callable<SVMFreeCallback>(given, "onFree", "(queue, allocations) => void");
      waitFor = own(bag, "waitFor");
    }
    const n = allocations.length;
    // A Set only pays for itself on long lists; the usual one or few compare pairwise.
    const seen = n > 8 ? new Set<SVMAllocation>() : undefined;
    for (let i = 0; i < n; i++) {
      const a = allocations[i];
      if (!(a instanceof SVMAllocation)) throw new TypeError(`allocations[${i}] is not a cl.SVMAllocation, got ${show(a)}`);
      if (a.context !== this.context) throw new TypeError(`allocations[${i}] belongs to another context than this queue`);
      let twice = false;
      if (seen !== undefined) twice = seen.size === seen.add(a).size;
      else for (let j = 0; j < i && !twice; j++) twice = allocations[j] === a;
      if (twice) throw new TypeError(`allocations[${i}] appears twice: it would be freed twice`);
      a.pointer(); // ReleasedError if already freed
    }
    const svmFree = clEnqueueSVMFree ??= optionalSymbol("clEnqueueSVMFree", "an OpenCL 2.0 platform");
    // Without onFree there is no callback to run inside the call: keep Deno's fast call.
    clEnqueueSVMFreeQuiet ??= opencl().unguarded.clEnqueueSVMFree;
    const { count, list } = waitList(waitFor);
    const array = n > 0 ? scratchPointers(n) : null;
    for (let i = 0; i < n; i++) array![i] = allocations[i].address;
    if (onFree === undefined) {
      check("clEnqueueSVMFree", clEnqueueSVMFreeQuiet(handle, n, array, null, 0, count, list, eventOut) as number);
      for (let i = 0; i < n; i++) allocations[i].surrender();
      return eventFrom(eventOut, this.context);
    }
    const given = allocations.slice();
    const pointers = given.map((a) => a.pointer());
    const { id, outcome } = registerFree(this, this.context.nativeHandle(), given, pointers, onFree);
    const status = svmFree(handle, n, array, svmFreeTrampoline(), id, count, list, eventOut) as number;
    if (status !== 0) {
      abandonFree(id);
      throw new OpenCLError("clEnqueueSVMFree", status);
    }
    for (const a of given) a.surrender();
    this.#track(outcome.done);
    if (count > 0) watchFailure(id, eventOut);
    return eventFrom(eventOut, this.context, outcome);
  }

  #track(work: Promise<unknown>): void {
    const pending = this.#pending;
    pending.add(work);
    const forget = () => void pending.delete(work);
    work.then(forget, forget);
  }

  /** Issues the queued commands (clFlush). */
  flush(): void {
    check("clFlush", opencl().symbols.clFlush(this.handle()));
  }

  /** Resolves once every queued command completed and their callbacks (e.g. `onFree`) ran. */
  async finish(): Promise<void> {
    const call = opencl().async.clFinish(this.handle()) as Promise<number>;
    // release() waits for it: the queue must not be released under a clFinish still running.
    this.#track(call);
    check("clFinish", await call);
    while (this.#pending.size > 0) await Promise.allSettled([...this.#pending]);
  }

  /** CL_QUEUE_REFERENCE_COUNT (stale at once: for debugging). */
  get referenceCount(): number {
    return infoU64("clGetCommandQueueInfo", opencl().symbols.clGetCommandQueueInfo, this.handle(), QueueInfo.REFERENCE_COUNT, 4);
  }

  retain(): this {
    check("clRetainCommandQueue", opencl().symbols.clRetainCommandQueue(this.handle()));
    this.#refs++;
    return this;
  }

  /**
   * Drops a reference. The native release waits for callbacks this queue still owes and then runs
   * off the JS thread (OpenCL may finish the queue inside it, which can wait on callback threads).
   */
  release(): void {
    const handle = this.#handle;
    if (handle === null) return;
    if (--this.#refs === 0) {
      this.#handle = null;
      net.remove(this);
    }
    const context = this.context;
    const nativeRelease = () => releaseQueue(handle, context);
    if (this.#pending.size === 0) nativeRelease();
    else void Promise.allSettled([...this.#pending]).then(nativeRelease);
  }

  [Symbol.dispose](): void {
    this.release();
  }

  /** The raw cl_command_queue. Unsafe: invalid after release. */
  get unsafeHandle(): Pointer {
    return this.handle();
  }
}
