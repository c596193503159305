/** Buffers (cl_mem) and their destructor callbacks (clSetMemObjectDestructorCallback). */
import type { Pointer } from "../../ffi/types.ts";
import { trampolines } from "../trampolines.ts";
import { backend } from "../backend.ts";
import {
  defer,
  executorRan,
  finalizerState,
  IdTable,
  owe,
  paid,
  reportCallbackError,
  returnedPromise,
  SafetyNet,
} from "../callbacks.ts";
import { OpenCLError, ReleasedError } from "../errors.ts";
import { integer, isDetached, keys, member, memoryBytes, names, plainObject, show, unknownOption } from "../check.ts";
import { MemFlags, MemInfo } from "./constants.ts";
import { check, infoPointer, infoU64, opencl, symbols, unguarded } from "./native.ts";
import type { Context } from "./context.ts";
import { classes } from "./classes.ts";
import { closeStatics, commandHandle, contextOf, fromFactory, genuine, notByNew, sizeOf } from "../internal.ts";
import { allocationBehind, holdAllocation, letGoAllocation } from "./svm-memory.ts";
import type { SVMAllocation } from "./svm.ts";

// Classes this module cannot import (see classes.ts), read at each call.
const cls = classes;

/** May be `async`: `destroyed` waits for the promise it returns, and a rejection counts as a throw. */
export type DestructorCallback = (buffer: Buffer) => unknown;

/** What stays in JS for a buffer whose native side will call us back when it is destroyed. */
interface Destructor {
  /**
   * The buffer, set only where it must be held: callbacks will be passed it, and a `hostPtr: "use"`
   * buffer is held as the README says. The entry stays in `destructors` until the native destructor
   * arrives, so a buffer referenced here can never be collected: one whose `destroyed` was merely
   * read must stay collectable, for the safety net to release it (which then settles `destroyed`).
   */
  buffer: Buffer | undefined;
  /**
   * The one callback, or several in order of registration (run in reverse, like OpenCL's own
   * callback stack); made on first use. Most buffers have one: no array is kept for it while the
   * destructor is owed (bench/retained.ts).
   */
  callbacks: DestructorCallback | DestructorCallback[] | undefined;
  /** The host memory of a `hostPtr: "use"` buffer: pinned until the native side lets go. */
  hostMemory: ArrayBufferView | undefined;
  /** DELIVERED, OWED and SETTLED bits, one field for three: an entry lives as long as its destructor is owed. */
  state: number;
  /** `destroyed`, made when first read; `resolve`/`reject` settle it. */
  promise: Promise<void> | undefined;
  resolve: (() => void) | undefined;
  reject: ((error: unknown) => void) | undefined;
}

/** The native destructor arrived. */
const DELIVERED = 1;
/** Released for the last time, the destructor still to come: `owe()` was called for it. */
const OWED = 2;
/** The callbacks ran and what they threw was delivered: `destroyed` read from now on resolves. */
const SETTLED = 4;

const noErrors: readonly unknown[] = Object.freeze([]);
const destructors = new IdTable<Destructor>();

/** The process-wide trampoline: one native function pointer for every buffer. */
const destructorTrampoline = trampolines.bufferDestructor((_memobj, id) => {
  const entry = destructors.delete(id);
  if (entry === undefined) return;
  const state = entry.state;
  entry.state = (state & ~OWED) | DELIVERED;
  if ((state & OWED) !== 0) paid();
  // With no user callback there is no user code to keep out of the native call: settling here
  // only queues the promise's reactions, which run after the current synchronous code anyway.
  if (entry.callbacks === undefined) settle(entry, noErrors);
  else defer(runDestructors, entry);
});

function runDestructors(entry: Destructor): void {
  let errors: unknown[] | undefined;
  let later: PromiseLike<unknown>[] | undefined;
  const callbacks = entry.callbacks!;
  const list = typeof callbacks === "function" ? undefined : callbacks;
  const buffer = entry.buffer!; // set with the first callback
  for (let i = list === undefined ? 0 : list.length - 1; i >= 0; i--) {
    try {
      const promise = returnedPromise((list === undefined ? callbacks as DestructorCallback : list[i])(buffer));
      if (promise !== undefined) (later ??= []).push(promise);
    } catch (error) {
      // Whatever was thrown, `undefined` included: the array's length counts, not the value.
      (errors ??= []).push(error);
    }
  }
  if (later === undefined) return settle(entry, errors ?? noErrors);
  // `async` callbacks: `destroyed` waits for them and a rejection counts as a throw. The host
  // memory is the program's again already: the native side let go of it.
  letGo(entry);
  void Promise.allSettled(later).then((results) => {
    for (const r of results) if (r.status === "rejected") (errors ??= []).push(r.reason);
    settle(entry, errors ?? noErrors);
  });
}

/**
 * Each exception reaches the program once: through `destroyed` if the program read it before the
 * callbacks ran, else through onCallbackError (or as an uncaught exception). Afterwards,
 * `destroyed` resolves.
 */
function settle(entry: Destructor, errors: readonly unknown[]): void {
  letGo(entry);
  entry.state |= SETTLED;
  const { resolve, reject } = entry;
  entry.resolve = entry.reject = undefined;
  if (errors.length === 0) resolve?.();
  else if (reject !== undefined) {
    reject(failure(errors));
    // Delivered: `destroyed` read again from now on resolves (README, exceptions reach the program once).
    entry.promise = undefined;
  } else for (const error of errors) reportCallbackError(error, "destructor");
}

/** The native side let go of a `hostPtr: "use"` buffer's host memory. */
function letGo(entry: Destructor): void {
  if (entry.hostMemory === undefined) return;
  entry.hostMemory = undefined;
  letGoAllocation(entry);
}

function failure(errors: readonly unknown[]): unknown {
  return errors.length === 1 ? errors[0] : new AggregateError(errors, "destructor callbacks threw");
}

function promiseFor(entry: Destructor): Promise<void> {
  // What the callbacks threw went to a `destroyed` read before, or to onCallbackError.
  if ((entry.state & SETTLED) !== 0) return Promise.resolve();
  const promise = new Promise<void>((resolve, reject) => {
    entry.resolve = resolve;
    entry.reject = reject;
  });
  executorRan(entry.resolve, promise);
  return promise;
}

/**
 * A native destructor is still to come for a buffer released for the last time: hold the event
 * loop open until it arrives (a driver thread, or a command still using the memory object).
 */
function owedLater(entry: Destructor): void {
  if ((entry.state & DELIVERED) !== 0) return;
  owe(); // first: should it throw (the edge of the stack), nothing is marked owed that was not
  entry.state |= OWED;
}

/** What the safety net needs to release a dropped buffer: never the buffer itself. */
interface Held {
  handle: Pointer;
  context: Context;
  refs: number;
  /** Made when `destroyed` was read: a buffer with callbacks is held, so never dropped with one. */
  destructor: Destructor | undefined;
}

const net = new SafetyNet<Held, Buffer>(({ handle, context, refs, destructor }) => {
  // The guarded binding: a watched buffer's destructor may be called inside this release.
  for (let i = 0; i < refs; i++) opencl().symbols.clReleaseMemObject(handle);
  cls.disown(context);
  if (destructor !== undefined) owedLater(destructor);
}, (buffer) => Buffer[finalizerState](buffer));

export type HostPtrMode = "use" | "copy" | "alloc";
export type Access = "read_write" | "read_only" | "write_only";

export interface BufferOptions {
  /** Kernel access (CL_MEM_READ_WRITE by default). */
  access?: Access;
  /**
   * What to do with the ArrayBufferView given as data: "use" (CL_MEM_USE_HOST_PTR: the buffer's
   * storage is that memory, pinned until the buffer is destroyed), "copy" (CL_MEM_COPY_HOST_PTR,
   * the default when data is given), or "alloc" (CL_MEM_ALLOC_HOST_PTR, with or without data).
   */
  hostPtr?: HostPtrMode;
}

export const accessFlags: Readonly<Record<string, number>> = names({
  read_write: MemFlags.READ_WRITE,
  read_only: MemFlags.READ_ONLY,
  write_only: MemFlags.WRITE_ONLY,
});

const hostPtrModes: Readonly<Record<string, HostPtrMode>> = names({ use: "use", copy: "copy", alloc: "alloc" });
const bufferOptionKeys = keys("access", "hostPtr");

/** Turns `createBuffer`'s arguments into clCreateBuffer's, throwing TypeError/RangeError on bad input. */
export function bufferArguments(
  sizeOrData: number | ArrayBufferView,
  options: BufferOptions | undefined,
): { flags: number; size: number; data: ArrayBufferView | null; held?: SVMAllocation } {
  let flags: number = MemFlags.READ_WRITE;
  let data: ArrayBufferView | null = null;
  let size: number;
  let held: SVMAllocation | undefined;
  // options() + own() + member() (check.ts), in one pass: those cost 60-150 ns a buffer in a
  // create-and-await loop (bench/parts.ts --part=hostptr), as much as a third of the native calls.
  // The rules are theirs: every own enumerable key must be an option, an option counts only as an
  // own property (enumerable or not), and values are read after the keys were checked.
  let bag: Record<string, unknown> | undefined;
  let mode: HostPtrMode | undefined;
  if (options !== undefined) {
    bag = plainObject(options, bufferOptionKeys, "createBuffer options");
    for (const key in bag) {
      if (key !== "hostPtr" && key !== "access" && Object.hasOwn(bag, key)) {
        throw unknownOption(key, bufferOptionKeys, "createBuffer options");
      }
    }
    // Asked first, read second: an inherited getter (a patched Object.prototype) never runs. Each
    // key asked as `plainObject` says, written out per key (see there).
    const given = "hostPtr" in bag && (!("hostPtr" in Object.prototype) || Object.hasOwn(bag, "hostPtr"))
      ? bag.hostPtr
      : undefined;
    mode = given === "use" || given === "copy" || given === "alloc"
      ? given
      : member(hostPtrModes, given, "hostPtr", undefined);
    // Every option is read before the view is looked at: a getter may resize or detach it.
    if ("access" in bag && (!("access" in Object.prototype) || Object.hasOwn(bag, "access"))) {
      flags = member(accessFlags, bag.access, "access", flags);
    }
  }
  if (typeof sizeOrData === "number") {
    size = integer(sizeOrData, "size_t", "buffer size", 1);
  } else if (ArrayBuffer.isView(sizeOrData)) {
    // "use": OpenCL keeps the pointer for the buffer's life, so the memory must not move or shrink;
    // SVM memory under it is held by the buffer (asked here, before the native create, and once:
    // the question also refuses freed memory, which memoryBytes would ask again).
    if (mode === "use") held = allocationBehind(sizeOrData);
    size = memoryBytes(sizeOrData, "buffer data", mode === "use", mode === "use");
    data = sizeOrData;
    if (size === 0) throw new RangeError("buffer data must not be empty");
  } else {
    throw new TypeError(
      `createBuffer takes a size in bytes or an ArrayBufferView (e.g. a Float32Array), got ${show(sizeOrData)}`,
    );
  }
  if (bag !== undefined) {
    if (mode !== undefined) {
      if (mode === "use" || mode === "copy") {
        if (data === null) throw new TypeError(`hostPtr: "${mode}" needs an ArrayBufferView as the buffer's data`);
        flags |= mode === "use" ? MemFlags.USE_HOST_PTR : MemFlags.COPY_HOST_PTR;
        if (mode === "use") return { flags, size, data, held };
      } else {
        flags |= MemFlags.ALLOC_HOST_PTR | (data !== null ? MemFlags.COPY_HOST_PTR : 0);
      }
      return { flags, size, data };
    }
  }
  if (data !== null) flags |= MemFlags.COPY_HOST_PTR;
  return { flags, size, data };
}

/**
 * A buffer (cl_mem). `release()` drops your reference; the memory object is destroyed when OpenCL
 * is done with it too (e.g. after queued commands that use it), which `destroyed` and the
 * destructor callbacks tell you.
 * @example
 * import { cl } from "memlife";
 * using ctx = cl.createContext();
 * const host = new Float32Array(1024);
 * const buf = ctx.createBuffer(host, { hostPtr: "use" });
 * buf.setDestructorCallback(() => console.log("host memory free to reuse"));
 * buf.release();
 * await buf.destroyed;
 */
export class Buffer {
  #handle: Pointer | null;
  #refs = 1;
  #destructor: Destructor | undefined;
  readonly #context: Context;
  // Private behind getters: the queue's range checks read the size, and a program could otherwise
  // assign it (a larger `size` had a write past the end reach the driver); the flags, as much.
  readonly #size: number;
  readonly #flags: number;

  /** @internal Whether `value` is one itself, not a Proxy of one (see `genuine` in internal.ts). */
  static [genuine](value: unknown): value is Buffer {
    return typeof value === "object" && value !== null && #handle in value;
  }

  /** @internal use `ctx.createBuffer()`. */
  constructor(
    made: typeof fromFactory,
    context: Context,
    handle: Pointer,
    size: number,
    flags: number,
    hostMemory: ArrayBufferView | null,
    held?: SVMAllocation,
  ) {
    if (made !== fromFactory) notByNew("cl.Buffer", "ctx.createBuffer()");
    this.#handle = handle;
    this.#context = context;
    this.#size = size;
    this.#flags = flags;
    cls.adopt(context); // through the Context class (see classes.ts): whatever the context's prototype
    if (hostMemory === null) net.add(this);
    else this.#holdHostMemory(hostMemory, held);
  }

  // Out of line: the constructor stays small enough for V8 to inline (see Context.createBuffer).
  #holdHostMemory(hostMemory: ArrayBufferView, held: SVMAllocation | undefined): void {
    // A `hostPtr: "use"` view must stay alive until the native side lets go, not until release().
    // Such a buffer stays out of the safety net and is held (the README: it must be released).
    if ((this.#flags & MemFlags.USE_HOST_PTR) !== 0) {
      let entry: Destructor;
      try {
        entry = this.#watch();
      } catch (error) {
        // Without its destructor callback nobody could tell when the memory is free again: no buffer.
        const handle = this.#handle!;
        this.#handle = null;
        unguarded.clReleaseMemObject(handle);
        cls.disown(this.#context);
        throw error;
      }
      entry.hostMemory = hostMemory;
      entry.buffer = this;
      if (held !== undefined) holdAllocation(entry, held);
    } else net.add(this);
  }

  /** @internal What the safety net registers (see `finalizerState`). */
  static [finalizerState](buffer: Buffer): Held | undefined {
    if (buffer.#handle === null) return undefined;
    return { handle: buffer.#handle, context: buffer.#context, refs: buffer.#refs, destructor: buffer.#destructor };
  }

  /** The context it belongs to. */
  get context(): Context {
    return this.#context;
  }

  /** @internal The context from the private field (see `contextOf`). */
  static [contextOf](x: Buffer): Context {
    return x.#context;
  }

  get alive(): boolean {
    return this.#handle !== null;
  }

  /** Size in bytes. */
  get size(): number {
    return this.#size;
  }

  /** The cl_mem_flags it was created with. */
  get flags(): number {
    return this.#flags;
  }

  /** @internal The size in bytes, from the private field (an own `size` may lie). */
  static [sizeOf](buffer: Buffer): number {
    return buffer.#size;
  }

  /** @internal */
  #live(): Pointer {
    if (this.#handle === null) throw new ReleasedError("Buffer");
    return this.#handle;
  }

  /**
   * @internal The cl_mem for a command that reads or writes it, from the private fields of a
   * buffer the caller brand-checked: through the class, so that an instance given another
   * prototype cannot answer for it. A `hostPtr: "use"` buffer's storage is the program's
   * ArrayBuffer: once that was transferred away, a command would touch memory that is no longer
   * the buffer's (freed, or someone else's), so it is refused.
   */
  static [commandHandle](buffer: Buffer): Pointer {
    const handle = buffer.#handle;
    if (handle === null) throw new ReleasedError("Buffer");
    const host = buffer.#destructor?.hostMemory;
    if (host !== undefined && isDetached(host)) {
      throw new TypeError(
        'this hostPtr "use" buffer\'s host memory was transferred away (its ArrayBuffer is detached: transferred, or a WebAssembly.Memory that grew): no command may use the buffer any more; release it',
      );
    }
    return handle;
  }

  /**
   * Registers our one native destructor callback for this buffer, the first time it is needed, and
   * tells the safety net that a destructor is now owed.
   */
  #watch(): Destructor {
    let entry = this.#destructor;
    if (entry === undefined) {
      const handle = this.#live();
      entry = {
        buffer: undefined,
        callbacks: undefined,
        hostMemory: undefined,
        state: 0,
        promise: undefined,
        resolve: undefined,
        reject: undefined,
      };
      const id = destructors.add(entry);
      const status = symbols.clSetMemObjectDestructorCallback(handle, destructorTrampoline(), id);
      if (status !== 0) {
        destructors.delete(id);
        throw new OpenCLError("clSetMemObjectDestructorCallback", status);
      }
      this.#destructor = entry;
      // Registered already, the finalizer must learn that a destructor is owed (see owedLater).
      if (this.#inNet()) net.renew(this);
    }
    return entry;
  }

  /**
   * Calls `callback(buffer)` on the JS thread once the memory object is destroyed, after callbacks
   * registered later (OpenCL's reverse order), never inside `release()`. Each runs once; one that
   * throws does not stop the others (see `onCallbackError`).
   */
  setDestructorCallback(callback: DestructorCallback): void {
    if (typeof callback !== "function") {
      throw new TypeError(`setDestructorCallback takes a function (buffer) => void, got ${show(callback)}`);
    }
    this.#live(); // ReleasedError: the memory object may already be gone
    const entry = this.#watch();
    entry.buffer = this; // the callbacks will be passed it: held until the destructor arrives
    // The entry lives until the destructor arrives, which a driver thread may deliver only after
    // thousands of others: one callback is kept as it is, an array only for more.
    const callbacks = entry.callbacks;
    if (callbacks === undefined) entry.callbacks = callback;
    else if (typeof callbacks === "function") entry.callbacks = [callbacks, callback];
    else callbacks.push(callback);
  }

  /**
   * Settles after every destructor callback has run: the native memory object is gone and the host
   * memory of a `hostPtr: "use"` buffer may be reused. Rejects with what a callback threw (or the
   * rejection of an `async` one), which then goes nowhere else; read only after the callbacks ran,
   * it resolves (their exceptions went to `onCallbackError`). Read inside one of them, it counts as
   * read before: an `async` callback must not await it (it would wait for itself). Read it before
   * the last `release()`: after that, the memory object can no longer be watched. Reading it does
   * not hold the buffer: dropped, the safety net releases it and `destroyed` resolves.
   */
  get destroyed(): Promise<void> {
    let entry = this.#destructor;
    if (entry === undefined) {
      if (this.#handle === null) {
        return Promise.reject(
          new ReleasedError("Buffer (read `destroyed` or set a destructor callback before the last release())"),
        );
      }
      try {
        entry = this.#watch();
      } catch (error) {
        // A getter of a promise rejects: the driver could not register the callback.
        return Promise.reject(error);
      }
    }
    return entry.promise ??= promiseFor(entry);
  }

  /** CL_MEM_REFERENCE_COUNT (OpenCL says: stale at once, for debugging). */
  get referenceCount(): number {
    return infoU64(
      "clGetMemObjectInfo",
      opencl().symbols.clGetMemObjectInfo,
      this.#live(),
      MemInfo.REFERENCE_COUNT,
      4,
    );
  }

  /** CL_MEM_HOST_PTR as an address (0n unless created with hostPtr "use"). */
  get hostPointer(): bigint {
    return backend.address(
      infoPointer("clGetMemObjectInfo", opencl().symbols.clGetMemObjectInfo, this.#live(), MemInfo.HOST_PTR),
    );
  }

  /** Adds a reference (clRetainMemObject); each `retain()` needs its own `release()`. */
  retain(): this {
    check("clRetainMemObject", opencl().symbols.clRetainMemObject(this.#live()));
    this.#refs++;
    if (this.#inNet()) net.renew(this);
    return this;
  }

  /**
   * Drops a reference (clReleaseMemObject). After the last one the buffer can't be used; further
   * calls do nothing. Destructor callbacks run later, on the JS thread, once OpenCL destroys it.
   */
  release(): void {
    const handle = this.#handle;
    if (handle === null) return;
    if (this.#refs !== 1 || this.#destructor !== undefined) return this.#releaseOther(handle);
    // The usual release: the last reference, no destructor callback, so nothing can call back into
    // JS during it and the unguarded binding may keep Deno's fast call (28 ns less per buffer).
    net.remove(this); // first: what throws must leave the buffer as it was
    this.#handle = null; // #refs stays 1: nothing reads it once the handle is gone
    const status = unguarded.clReleaseMemObject(handle);
    cls.disown(this.#context);
    if (status !== 0) check("clReleaseMemObject", status);
  }

  // Out of line: the usual release stays small enough for V8 to inline with createBuffer into the
  // caller (see Context.createBuffer).
  #releaseOther(handle: Pointer): void {
    // The count is stored after the safety net's call, with nothing that may throw between it and
    // the native release: at the edge of the stack a RangeError in `net.remove` left the count at 0
    // with the handle set, and the next release() counted down to -1 and released the cl_mem twice
    // (PoCL then crashed: test/fixtures/deferred-hostile.ts "edge-release").
    const refs = this.#refs - 1;
    const last = refs === 0;
    if (this.#inNet()) {
      if (last) net.remove(this);
      else net.renew(this);
    }
    this.#refs = refs;
    if (last) this.#handle = null;
    const entry = this.#destructor;
    let status: number;
    try {
      status = entry === undefined ? unguarded.clReleaseMemObject(handle) : symbols.clReleaseMemObject(handle);
    } finally {
      // Also where the call threw after the native release (the edge of the stack in what follows
      // it): the buffer is the program's no longer, and its context must not count it for ever.
      if (last) cls.disown(this.#context);
    }
    if (status !== 0) throw new OpenCLError("clReleaseMemObject", status);
    if (last && entry !== undefined) owedLater(entry);
  }

  /**
   * Whether the safety net may hold it: a `hostPtr: "use"` buffer never does (see the constructor),
   * and asking its registry about one anyway cost 7-9 ns a buffer (bench/js-cost.ts "hostPtr memlife").
   */
  #inNet(): boolean {
    return (this.#flags & MemFlags.USE_HOST_PTR) === 0;
  }

  [Symbol.dispose](): void {
    this.release();
  }

  /** The raw cl_mem. Unsafe: invalid after release, and OpenCL calls on it bypass memlife. */
  get unsafeHandle(): Pointer {
    return this.#live();
  }

  static {
    closeStatics(this);
  }
}
