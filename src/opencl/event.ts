/** Events: what a queued command returns, to wait on or to chain with `waitFor`. */
import type { Pointer } from "../../ffi/types.ts";
import { backend } from "../backend.ts";
import { openclCallbacks } from "../../ffi/symbols/opencl.ts";
import { type CallbackOutcome, finalizerState, IdTable, inRegistry, reportCallbackError, SafetyNet } from "../callbacks.ts";
import { OpenCLError, ReleasedError } from "../errors.ts";
import { integer, show } from "../check.ts";
import { EventInfo, ExecutionStatus } from "./constants.ts";
import { check, errcode, infoU32, opencl, pointerArray, symbols } from "./native.ts";
import type { Context } from "./context.ts";

const net = new SafetyNet<{ handle: Pointer; context: Context; user?: true }>(({ handle, context, user }) => {
  if (user) abandon(handle);
  opencl().symbols.clReleaseEvent(handle);
  context.disown();
});

/**
 * A user event whose last reference goes while it has no status can never complete: nobody holds
 * it to call clSetUserEventStatus any more. OpenCL keeps such an event until it completes, the
 * commands waiting on it wait for ever, and NVIDIA's final clReleaseContext waits for it for ever
 * (measured on the H100, driver 580: the process never ended). So it is failed first, with
 * CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST: the commands that wait on it terminate with that
 * error, and the driver can let the event and the context go.
 */
function abandon(handle: Pointer): void {
  const s = opencl().symbols;
  if ((infoU32("clGetEventInfo", s.clGetEventInfo, handle, EventInfo.COMMAND_EXECUTION_STATUS) | 0) > 0) {
    s.clSetUserEventStatus(handle, ABANDONED);
  }
}
const ABANDONED = -14;

/**
 * Events whose completion callback is registered: the resolver and the host memory it pins.
 * `wait()` does not use it: PoCL never calls it for a command whose wait list failed, while
 * clWaitForEvents reports that failure.
 */
const completions = new IdTable<{ resolve: (status: number) => void; pinned: unknown }>();
let completionTrampoline: ReturnType<typeof backend.callback> | undefined;

/**
 * @internal What a queue learns from waits on its commands' events: on an in-order queue, a
 * command that completed means every command enqueued before it completed too.
 */
export interface CommandTracker {
  waitStarted(seq: number): void;
  waitEnded(seq: number, completed: boolean): void;
}

/**
 * A cl_event. `wait()` never blocks the JS thread: clWaitForEvents runs on a backend thread.
 * @example
 * import { cl } from "memlife";
 * using ctx = cl.createContext();
 * using queue = ctx.createCommandQueue();
 * const allocs = [ctx.svmAlloc(1024), ctx.svmAlloc(1024)];
 * const event = queue.enqueueSVMFree(allocs, { onFree: () => console.log("freed") });
 * await event.wait(); // the command completed and onFree ran
 */
export class Event {
  #handle: Pointer | null;
  #refs = 1;
  /** JS-side work that completes the command from the program's point of view (e.g. `onFree`). */
  #after: CallbackOutcome | undefined;
  /** Resolves with the final execution status (CL_COMPLETE or a negative error) once OpenCL says so. */
  #completed: Promise<number> | undefined;
  /** The queue whose command this is, and the command's number there. */
  #tracker: CommandTracker | undefined;
  #seq = 0;
  readonly context: Context;
  [inRegistry] = false;

  /** @internal made by queues and contexts. */
  constructor(handle: Pointer, context: Context, after?: CallbackOutcome) {
    this.#handle = handle;
    this.#after = after;
    this.context = context;
    context.adopt();
    net.add(this);
  }

  [finalizerState](): { handle: Pointer; context: Context; user?: true } {
    const held: { handle: Pointer; context: Context; user?: true } = { handle: this.#handle!, context: this.context };
    if (this instanceof UserEvent) held.user = true;
    return held;
  }

  get alive(): boolean {
    return this.#handle !== null;
  }

  /** @internal */
  handle(): Pointer {
    if (this.#handle === null) throw new ReleasedError("Event");
    return this.#handle;
  }

  /** CL_EVENT_COMMAND_TYPE, e.g. `cl.CommandType.SVM_FREE` (0x1209). */
  get commandType(): number {
    return infoU32("clGetEventInfo", opencl().symbols.clGetEventInfo, this.handle(), EventInfo.COMMAND_TYPE);
  }

  /** CL_EVENT_COMMAND_EXECUTION_STATUS: `cl.ExecutionStatus` or a negative error code. */
  get status(): number {
    return infoU32("clGetEventInfo", opencl().symbols.clGetEventInfo, this.handle(), EventInfo.COMMAND_EXECUTION_STATUS) | 0;
  }

  /**
   * Settles once the command completed and its JS callbacks (e.g. `onFree`) ran. Rejects with an
   * OpenCLError if the command failed, or with what a callback threw.
   */
  async wait(): Promise<void> {
    const handle = this.handle();
    // The cl_event must outlive the wait even if the program releases it meanwhile (a released
    // event waited on crashes PoCL): the wait holds a reference of its own, and its context.
    check("clRetainEvent", opencl().symbols.clRetainEvent(handle));
    const context = this.context;
    context.adopt();
    // Held from the start: an exception of `onFree` that arrives during the native wait is this
    // promise's to deliver, not onCallbackError's.
    const after = this.#after?.hold();
    // It may reject before the native wait returns: handled below, not an unhandled rejection.
    after?.catch(noop);
    const tracker = this.#tracker;
    tracker?.waitStarted(this.#seq);
    let status = -1;
    try {
      status = await opencl().async.clWaitForEvents(1, pointerArray([handle])) as number;
    } finally {
      tracker?.waitEnded(this.#seq, status === 0);
      opencl().symbols.clReleaseEvent(handle);
      context.disown();
      // This wait rejects with the native failure; a callback exception still reaches the program.
      if (status !== 0) after?.catch((error) => reportCallbackError(error, "svmFree"));
    }
    check("clWaitForEvents", status);
    await after;
  }

  /** @internal The event of command number `seq` of an in-order queue. */
  track(tracker: CommandTracker, seq: number): this {
    this.#tracker = tracker;
    this.#seq = seq;
    return this;
  }

  /**
   * @internal Registers the completion callback on first use; `pin` keeps what a command uses
   * (host memory it reads or writes, SVM allocations) alive until the command is done.
   */
  completion(pin?: unknown): Promise<number> {
    if (this.#completed !== undefined) return this.#completed;
    const handle = this.handle();
    completionTrampoline ??= backend.callback(openclCallbacks.eventStatus, (_event: unknown, status: number, id: number) => {
      completions.delete(id)?.resolve(status);
    });
    let resolve!: (status: number) => void;
    const completed = new Promise<number>((r) => (resolve = r));
    const id = completions.add({ resolve, pinned: pin });
    const status = opencl().symbols.clSetEventCallback(handle, 0 /* CL_COMPLETE */, completionTrampoline, id);
    if (status !== 0) {
      completions.delete(id);
      throw new OpenCLError("clSetEventCallback", status);
    }
    return this.#completed = completed;
  }

  /** Adds a reference (clRetainEvent); each `retain()` needs its own `release()`. */
  retain(): this {
    check("clRetainEvent", opencl().symbols.clRetainEvent(this.handle()));
    this.#refs++;
    return this;
  }

  /** Drops a reference; the last one releases the cl_event. A further call does nothing. */
  release(): void {
    const handle = this.#handle;
    if (handle === null) return;
    const last = --this.#refs === 0;
    if (last) {
      this.#handle = null;
      net.remove(this);
      // Nobody could set its status any more (see `abandon`).
      if (this instanceof UserEvent) abandon(handle);
    }
    const status = symbols.clReleaseEvent(handle);
    if (last) this.context.disown();
    check("clReleaseEvent", status);
  }

  [Symbol.dispose](): void {
    this.release();
  }

  /** The raw cl_event. Unsafe: invalid after release. */
  get unsafeHandle(): Pointer {
    return this.handle();
  }
}

/**
 * An event whose status the program sets (clCreateUserEvent), to hold commands back.
 * @example
 * import { cl } from "memlife";
 * const gate = ctx.createUserEvent();
 * const write = queue.enqueueWriteBuffer(buf, data, { waitFor: [gate] }); // held until the gate opens
 * gate.setStatus(cl.ExecutionStatus.COMPLETE);
 * await write.wait();
 */
export class UserEvent extends Event {
  /** @internal use `ctx.createUserEvent()`. */
  constructor(context: Context) {
    const handle = opencl().symbols.clCreateUserEvent(context.handle(), errcode) as Pointer | null;
    if (handle === null) throw new OpenCLError("clCreateUserEvent", errcode[0]);
    super(handle, context);
  }

  /**
   * Completes the event (or fails it with a negative status), releasing the commands that wait on
   * it. Released without a status, it fails with CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST (-14):
   * nobody could complete it any more.
   */
  setStatus(status: number = ExecutionStatus.COMPLETE): void {
    // A cl_int: Bun and koffi would wrap -(2 ** 32) to 0, CL_COMPLETE.
    const value = integer(status, "cl_int", "a user event's status (CL_COMPLETE, 0, or a negative error code)", undefined, 0);
    check("clSetUserEventStatus", opencl().symbols.clSetUserEventStatus(this.handle(), value));
  }
}

function noop(): void {}

const noWait: { count: number; list: BigUint64Array | null } = Object.freeze({ count: 0, list: null });

/** A `cl_event *` wait list from `waitFor`, checked before any native call. */
export function waitList(events: unknown): { count: number; list: BigUint64Array | null } {
  if (events === undefined) return noWait;
  if (!Array.isArray(events)) throw new TypeError(`waitFor must be an array of cl.Event, got ${show(events)}`);
  if (events.length === 0) return noWait;
  const handles = events.map((e, i) => {
    if (!(e instanceof Event)) throw new TypeError(`waitFor[${i}] is not a cl.Event, got ${show(e)}`);
    return e.handle();
  });
  return { count: handles.length, list: pointerArray(handles) };
}

/** Completion callbacks registered and not yet delivered (each pins what its command uses). */
export function completionsPending(): number {
  return completions.size;
}

/** Wraps the cl_event an enqueue call just wrote into `eventOut`. */
export function eventFrom(slot: BigUint64Array, context: Context, after?: CallbackOutcome): Event {
  return new Event(backend.fromAddress(slot[0]) as Pointer, context, after);
}
