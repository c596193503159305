/** Events: what a queued command returns, to wait on or to chain with `waitFor`. */
import type { Pointer } from "../../ffi/types.ts";
import {
  type CallbackOutcome,
  executorRan,
  IdTable,
  owe,
  paid,
  reportCallbackError,
  StatusPoll,
} from "../callbacks.ts";
import { backend } from "../backend.ts";
import { trampolines } from "../trampolines.ts";
import { OpenCLError, ReleasedError } from "../errors.ts";
import { integer, listLength, show } from "../check.ts";
import { EventInfo, ExecutionStatus } from "./constants.ts";
import { check, errcode, infoU32, infoU64, opencl, pointerArray, symbols, unguarded } from "./native.ts";
import { OpenCLStatus } from "./status-codes.ts";
import type { Context } from "./context.ts";
import { childKind } from "./child.ts";
import { finalizerState } from "../callbacks.ts";
import { classes } from "./classes.ts";
import { closeStatics, contextOf, fromFactory, genuine, guardHold, handleOf, notByNew } from "../internal.ts";

// Classes this module cannot import (see classes.ts), read at each call.
const cls = classes;

const kind = childKind({
  name: "Event",
  retainFn: "clRetainEvent",
  releaseFn: "clReleaseEvent",
  retain: (handle) => symbols.clRetainEvent(handle),
  release: (handle) => symbols.clReleaseEvent(handle),
}, (event: Event) => Event[finalizerState](event));

/** A user event's safety net fails it first when it has no status (see `abandon`). */
const userKind = childKind({
  name: "UserEvent",
  retainFn: "clRetainEvent",
  releaseFn: "clReleaseEvent",
  retain: (handle) => symbols.clRetainEvent(handle),
  release: (handle) => {
    abandon(handle);
    closeGate(handle);
    return symbols.clReleaseEvent(handle);
  },
}, (event: Event) => Event[finalizerState](event));

/**
 * The user events alive with no status yet, by handle: while there is one, any queued command may
 * still fail (SVM frees are watched then, see queue.ts `#freeList`), and on PoCL a wait list that
 * names one makes its command guarded (see FailureGuard).
 */
const openGates = new Set<Pointer>();

/**
 * @internal Whether a user event is alive with no status: then any queued command may still fail,
 * through its wait list or behind a failed command of its in-order queue.
 */
export function userEventsOpen(): boolean {
  return openGates.size !== 0;
}

/** The last wait list built (`waitHandles`) held an open user event; taken by the next command. */
let gatedWait = false;

function closeGate(handle: Pointer): void {
  openGates.delete(handle);
}

/**
 * PoCL before 7.0 finishes a command that fails (a user event in its wait list failed, or the
 * command before it in its queue) while other events it waits on have not ended, and those events
 * keep a pointer to it that holds no reference (`notify_list`, PoCL 3.1 `pocl_create_event_sync`).
 * Released then, the failed command's event is freed, and when one of those events ends it locks
 * the freed event: `PTHREAD ERROR in pocl_lock_events_inorder()`, an abort
 * (test/fixtures/failed-command-notifiers.ts: a second gate on the same queue, a second user event
 * or another queue's command in the wait list, a kernel still running before it). So on PoCL, from
 * a queue's first command whose wait list holds an open user event (or a guarded command) on,
 * every command of the queue is guarded: memlife holds one reference of its own to its cl_event,
 * and to each command event of its wait list, until everything it can wait on has ended a poll
 * (50 ms) before, whatever the program and memlife's waits release meanwhile. A marker enqueued
 * right before that first command stands for the commands before it. Nothing is guarded on other
 * drivers, nor on a queue that no user event ever held up.
 */
export class FailureGuard {
  /** The queue's guarded commands in enqueue order; the first is the marker before the first gated one. */
  readonly entries: GuardEntry[] = [];
  constructor() {
    anyGuard = true;
  }
}

/** A queue with a FailureGuard was made: until then no wait list needs references taken for one. */
let anyGuard = false;

interface GuardEntry {
  handle: Pointer;
  context: Context;
  /** The user events of its wait list that were open: it can fail until they are set or abandoned. */
  gates: Pointer[] | null;
  /** The command events of its wait list, each with a reference of the guard's own. */
  cross: Pointer[] | null;
  /** The poll's tick at which it was first seen ended (-1: not yet), and whether it failed. */
  endedTick: number;
  failed: boolean;
  /** The tick at which every command event of its wait list was first seen ended (-1: not yet). */
  crossEndedTick: number;
}

/**
 * @internal Whether `device`'s queues need a FailureGuard: PoCL before 7.0 (7.0 keeps a reference
 * for each event that waits, 15b5538e0 "event: add retain event during event sync").
 */
export function guardsFailures(device: { platform: { name: string; version: string } }): boolean {
  if (device.platform.name !== "Portable Computing Language") return false;
  const major = /PoCL (\d+)/.exec(device.platform.version)?.[1];
  return major === undefined || Number(major) < 7;
}

/**
 * A queue on PoCL's basic driver (`cpu-minimal` from PoCL 5.0): its commands may wait only for
 * events already complete, or for commands of the same queue (in order, run by the same flush).
 * PoCL's basic driver runs a command when the last event it waits for completes, on the thread
 * that completed it and under that event's lock, which it takes again: a user event's
 * clSetUserEventStatus (the JS thread) or a pthread worker then blocks for ever (pocl issue 1177,
 * open; PoCL 3.1 in C, another order segfaulted; PoCL 5.0 the same).
 * `test/fixtures/multi-device.ts` basic-gated.
 */
export function basicDriver(device: { name: string; platform: { name: string } }): boolean {
  // PoCL names a device after its driver: "basic-..." through 4.x, "cpu-minimal-..." from 5.0 (the
  // same driver renamed, and the same deadlock: PoCL 5.0 on the GPU machine hung there too).
  return device.platform.name === "Portable Computing Language" && /^(basic|cpu-minimal)(-|$)/.test(device.name);
}

/** Whether `event` is a command of `queue` (CL_EVENT_COMMAND_QUEUE; a user event has none). */
function commandOf(event: Pointer, queue: Pointer): boolean {
  const of = infoU64("clGetEventInfo", opencl().symbols.clGetEventInfo, event, EventInfo.COMMAND_QUEUE);
  return of !== 0 && BigInt(of) === backend.address(queue);
}

/** Guards with entries, drained by the poll; and the handles they hold (a wait list naming one is gated). */
const guards = new Set<FailureGuard>();
const guarded = new Set<Pointer>();
let guardTick = 0;
/**
 * What the wait list being enqueued (see `waitHandles`) holds for a guard: its open user events, and
 * its command events each with a reference of the guard's own, taken while the list's events are
 * surely alive. Taken by the command it was built for; one whose enqueue failed is let go by the
 * next wait list or command.
 */
let pendingGates: Pointer[] | null = null;
let pendingCross: Pointer[] | null = null;

function dropPending(): void {
  const cross = pendingCross;
  pendingGates = null;
  pendingCross = null;
  if (cross !== null) { for (const h of cross) opencl().symbols.clReleaseEvent(h); }
}

/** @internal Whether the wait list just built (not yet taken by its command) is gated. */
export function gatedWaitPending(): boolean {
  return gatedWait;
}

/**
 * @internal For the command whose event `handle` was just made on a queue: with the queue's `guard`
 * (PoCL), guarded when its wait list held an open user event or a guarded command, or when the
 * queue has guarded commands.
 */
export function commandMade(guard: FailureGuard | undefined, handle: Pointer, context: Context): void {
  const gated = gatedWait;
  gatedWait = false;
  if (guard !== undefined && (gated || guard.entries.length !== 0)) guardCommand(guard, handle, context);
  else if (pendingCross !== null || pendingGates !== null) dropPending();
}

function guardCommand(guard: FailureGuard, handle: Pointer, context: Context): void {
  const gates = pendingGates;
  const cross = pendingCross;
  pendingGates = null;
  pendingCross = null;
  // The command is enqueued: nothing here may throw to the program, which would enqueue it again.
  // At the edge of the stack the command goes unguarded (a reference taken may leak).
  try {
    if (opencl().symbols.clRetainEvent(handle) === OpenCLStatus.CL_SUCCESS) {
      addEntry(guard, { handle, context, gates, cross, endedTick: -1, failed: false, crossEndedTick: -1 });
    } else if (cross !== null) { for (const h of cross) opencl().symbols.clReleaseEvent(h); }
  } catch {
    // See above.
  }
}

/**
 * @internal A marker memlife enqueued on `guard`'s queue right before its first gated command: it
 * ends once every command before it did. The guard's reference is its only one.
 */
export function guardMarker(guard: FailureGuard, handle: Pointer, context: Context): void {
  addEntry(guard, { handle, context, gates: null, cross: null, endedTick: -1, failed: false, crossEndedTick: -1 });
}

function addEntry(guard: FailureGuard, entry: GuardEntry): void {
  cls.Context[guardHold](entry.context, 1);
  guard.entries.push(entry);
  guards.add(guard);
  guarded.add(entry.handle);
  try {
    poll.start();
  } catch {
    // At the edge of the stack: the next wait's poll drains it.
  }
}

function statusOf(handle: Pointer): number {
  return infoU32("clGetEventInfo", opencl().symbols.clGetEventInfo, handle, EventInfo.COMMAND_EXECUTION_STATUS) | 0;
}

/**
 * One poll tick over the guards. A command seen ended at an earlier tick (the driver notifies what
 * waits on a command after it wrote its status) is let go: at once when it completed (everything it
 * waited on had notified it), and when it failed, once every command before it in its queue, and
 * every command event of its wait list, was seen ended at an earlier tick and its user events are
 * set. PoCL runs and fails later commands of a queue while earlier ones are still queued: each entry
 * is read, not only the front.
 */
function drainGuards(): void {
  const tick = ++guardTick;
  const lib = opencl().symbols;
  for (const guard of guards) {
    const entries = guard.entries;
    let kept = 0;
    let earlierEnded = true;
    for (let i = 0; i < entries.length; i++) {
      const e = entries[i];
      if (e.endedTick < 0) {
        const status = statusOf(e.handle);
        if (status > 0) {
          entries[kept++] = e;
          earlierEnded = false;
          continue;
        }
        e.endedTick = tick;
        e.failed = status < 0;
      }
      let free = e.endedTick < tick;
      if (free && e.failed) {
        if (e.cross !== null && e.crossEndedTick < 0 && e.cross.every((c) => statusOf(c) <= 0)) e.crossEndedTick = tick;
        free = earlierEnded && (e.gates === null || !e.gates.some((g) => openGates.has(g))) &&
          (e.cross === null || (e.crossEndedTick >= 0 && e.crossEndedTick < tick));
      }
      if (e.endedTick === tick) earlierEnded = false;
      if (!free) {
        entries[kept++] = e;
        continue;
      }
      guarded.delete(e.handle);
      lib.clReleaseEvent(e.handle);
      if (e.cross !== null) { for (const c of e.cross) lib.clReleaseEvent(c); }
      cls.Context[guardHold](e.context, -1);
    }
    entries.length = kept;
    if (kept === 0) guards.delete(guard);
  }
}

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
  let unset = true;
  try {
    unset = (infoU32("clGetEventInfo", s.clGetEventInfo, handle, EventInfo.COMMAND_EXECUTION_STATUS) | 0) > 0;
  } catch {
    // The status could not be read: failed all the same (on one already set it fails, harmlessly),
    // and the release goes on.
  }
  if (unset) s.clSetUserEventStatus(handle, OpenCLStatus.CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
}

/**
 * @internal What a queue learns from waits on its commands' events: on an in-order queue, a
 * command that completed means every command enqueued before it completed too.
 */
export interface CommandTracker {
  waitStarted(seq: number): void;
  waitEnded(seq: number, completed: boolean): void;
  /** Issues the queue's commands (clFlush), as clWaitForEvents does before it waits; nothing once released. */
  flush(): void;
  /** Whether the queue still holds its own native reference (not released yet). */
  open(): boolean;
}

/**
 * A cl_event. `wait()` never blocks the JS thread, nor holds a thread while it waits: the driver
 * calls back when the command completed.
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
  readonly #kind: typeof kind;
  readonly #context: Context;
  /** JS-side work that completes the command from the program's point of view (e.g. `onFree`). */
  #after: CallbackOutcome | undefined;
  /** The queue whose command this is, and the command's number there. */
  #tracker: CommandTracker | undefined;
  #seq: number;
  /**
   * Its release can call nothing back: the event of a command that holds no memory object (whose
   * destructor could run) and no JS callback (onFree), waits on no event, and whose queue keeps
   * its own reference. `release()` may then keep Deno's fast call (about 0.25 us of the ~3 us an
   * SVM free takes, doubled on a 2-core machine where JS time competes with the driver's threads),
   * as long as the queue is still open.
   */
  #quiet: boolean;

  /** @internal Whether `value` is one itself, not a Proxy of one (see `genuine` in internal.ts). */
  static [genuine](value: unknown): value is Event {
    return typeof value === "object" && value !== null && #quiet in value;
  }

  /**
   * @internal made by queues and contexts; a queue's command gives its queue's `tracker`, its
   * number there, and whether it is `quiet`: all at construction, so that no event exists half set
   * up (the speed of it measured the same as setting them after, bench/js-cost.ts).
   */
  constructor(
    made: typeof fromFactory,
    handle: Pointer,
    context: Context,
    after?: CallbackOutcome,
    tracker?: CommandTracker,
    seq = 0,
    quiet = false,
    user = false,
  ) {
    // Not a ContextChild, as Buffer and SVMAllocation are not: V8 makes an object of a derived
    // class 15 ns slower than one of a class of its own (bench/js-cost.ts "event"), every command.
    if (made !== fromFactory) notByNew("cl.Event", "an enqueue");
    this.#handle = handle;
    // Told by UserEvent's constructor, not read from new.target: a subclass of UserEvent, or one
    // made with another new.target, was taken for a command's event, and its release never failed
    // it (what waited on it waited for ever).
    this.#kind = user ? userKind : kind;
    this.#context = context;
    this.#after = after;
    this.#tracker = tracker;
    this.#seq = seq;
    this.#quiet = quiet;
    cls.adopt(context); // through the Context class (see classes.ts): whatever the context's prototype
    this.#kind.net.add(this);
  }

  /** @internal What the safety net registers (see `finalizerState`). */
  static [finalizerState](event: Event): { handle: Pointer; context: Context; refs: number } | undefined {
    if (event.#handle === null) return undefined;
    return { handle: event.#handle, context: event.#context, refs: event.#refs };
  }

  /** The context it belongs to. */
  get context(): Context {
    return this.#context;
  }

  /** @internal The context from the private field (see `contextOf`). */
  static [contextOf](x: Event): Context {
    return x.#context;
  }

  get alive(): boolean {
    return this.#handle !== null;
  }

  #live(): Pointer {
    return Event[handleOf](this);
  }

  /** @internal The live handle through the class (see `handleOf`). */
  static [handleOf](event: Event): Pointer {
    if (event.#handle === null) throw new ReleasedError(event.#kind.name);
    return event.#handle;
  }

  /** Adds a native reference; each `retain()` needs its own `release()`. */
  retain(): this {
    check("clRetainEvent", symbols.clRetainEvent(this.#live()));
    this.#refs++;
    this.#kind.net.renew(this);
    return this;
  }

  /** Drops a reference; after the last one the object can't be used. A further call does nothing. */
  release(): void {
    const handle = this.#handle;
    if (handle === null) return;
    const net = this.#kind.net;
    const tracker = this.#tracker;
    const last = --this.#refs === 0;
    if (last) {
      this.#handle = null;
      // The tracker (a closure over the queue) and the outcome must not outlive the last reference,
      // or a released event the program keeps would keep a dropped queue from the safety net. A
      // wait() under way holds its own.
      this.#tracker = undefined;
      this.#after = undefined;
      // Through the kind, not a method: an event given another prototype is released all the same.
      if (this.#kind === userKind) {
        abandon(handle);
        closeGate(handle);
      }
      net.remove(this);
    } else net.renew(this);
    const status = this.#quiet && tracker !== undefined && tracker.open()
      ? unguarded.clReleaseEvent(handle)
      : symbols.clReleaseEvent(handle);
    if (last) cls.disown(this.#context);
    check("clReleaseEvent", status);
  }

  [Symbol.dispose](): void {
    this.release();
  }

  /** The raw handle (cl_event). Unsafe: invalid after release. */
  get unsafeHandle(): Pointer {
    return this.#live();
  }

  /** CL_EVENT_COMMAND_TYPE, e.g. `cl.CommandType.SVM_FREE` (0x1209). */
  get commandType(): number {
    return infoU32("clGetEventInfo", opencl().symbols.clGetEventInfo, this.#live(), EventInfo.COMMAND_TYPE);
  }

  /**
   * CL_EVENT_COMMAND_EXECUTION_STATUS: `cl.ExecutionStatus` or a negative error code. A command
   * with JS callbacks (an SVM free's `onFree`) reads RUNNING until they ran, as `wait()` settles:
   * in C the free callback has run once the command is COMPLETE, and memlife runs it later, on the
   * JS thread (it read COMPLETE while the memory was not freed yet).
   */
  get status(): number {
    const status = infoU32(
      "clGetEventInfo",
      opencl().symbols.clGetEventInfo,
      this.#live(),
      EventInfo.COMMAND_EXECUTION_STATUS,
    ) | 0;
    const after = this.#after;
    return status === ExecutionStatus.COMPLETE && after !== undefined && !after.settled
      ? ExecutionStatus.RUNNING
      : status;
  }

  /**
   * Settles once the command completed and its JS callbacks (e.g. `onFree`) ran. Rejects with an
   * OpenCLError if the command failed, or with what a callback threw.
   */
  wait(): Promise<void> {
    // Not async: an async method's frame holds `this` until it settles, and a user event the
    // program dropped while its own wait() was pending was then never failed by the safety net
    // (the wait, and every command behind the event, waited for ever). The native part below
    // holds the cl_event, never the object.
    try {
      const handle = this.#live();
      // The cl_event must outlive the wait even if the program releases it meanwhile (a released
      // event waited on crashes PoCL): the wait holds a reference of its own, and its context.
      check("clRetainEvent", opencl().symbols.clRetainEvent(handle));
      const context = this.#context;
      cls.adopt(context);
      // Held from the start: an exception of `onFree` that arrives during the native wait is this
      // promise's to deliver, not onCallbackError's.
      const after = this.#after?.hold();
      // It may reject before the native wait returns: handled in waitFor, not an unhandled rejection.
      after?.catch(noop);
      return waitFor(handle, context, after, this.#tracker, this.#seq, undefined);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  static {
    closeStatics(this);
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
    const handle = opencl().symbols.clCreateUserEvent(cls.Context[handleOf](context), errcode) as Pointer | null;
    if (handle === null) throw new OpenCLError("clCreateUserEvent", errcode[0]);
    super(fromFactory, handle, context, undefined, undefined, 0, false, true);
    openGates.add(handle);
  }

  /**
   * Completes the event (or fails it with a negative status), releasing the commands that wait on
   * it. Released without a status, it fails with CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST (-14):
   * nobody could complete it any more.
   */
  setStatus(status: number = ExecutionStatus.COMPLETE): void {
    // A cl_int: Bun and koffi would wrap -(2 ** 32) to 0, CL_COMPLETE.
    const value = integer(
      status,
      "cl_int",
      "a user event's status (CL_COMPLETE, 0, or a negative error code)",
      undefined,
      0,
    );
    const handle = Event[handleOf](this);
    check("clSetUserEventStatus", opencl().symbols.clSetUserEventStatus(handle, value));
    closeGate(handle);
  }
}

/**
 * Waits in progress, each the function that settles it with the command's execution status. The
 * driver tells `wait()` through a CL_COMPLETE event callback instead of a clWaitForEvents on a
 * thread: such a call held one of the runtime's few threads for async calls (Node's 4 libuv
 * threads, Deno's 32, Bun's 256) for as long as it waited, so waits on commands behind a closed
 * user event, past that many, left every later async call of the program waiting behind them (a
 * hostile pass: Node hung at 5, Deno at 35, Bun at 260; test/fixtures/async-gated-waits.ts).
 */
const waits = new IdTable<Wait>();

interface Wait {
  settle: (status: number) => void;
  /** The wait's own reference to the cl_event, for the poll. */
  handle: Pointer;
  /**
   * Its address, which a callback must name: the poll settles a wait whose command failed when no
   * callback came and gives its id to the next wait, and a driver that called back for the first
   * after all would settle the second with its status. (Ids never reused, in a Map, cost 200-250 ns
   * a wait more on V8, bench/js-cost.ts "writeBuffer awaited".)
   */
  address: bigint;
  /** Its owe() is counted and not paid yet. */
  owes: boolean;
  /** `wait()` gave up on it (the registration threw): the poll lets it go (see waitFor). */
  dropped: boolean;
}

/**
 * The cl_events of waits that could not be set up (at the edge of the stack), with the context
 * each holds: released by the poll once their command ended, as PoCL 3.1 aborts when a user event
 * fails under a queued command whose event was released (README, threading facts; a finish()'s
 * marker at the edge did it, test/fixtures/stack-limit.ts "finish").
 */
const strays: { handle: Pointer; context: Context; adopted: boolean }[] = [];

/**
 * The waits not called back yet are polled: PoCL 3.1 calls no CL_COMPLETE callback for a command
 * that fails because an event it waits on failed (a user event released without a status), as it
 * runs no SVM free callback then (see svm.ts `watchFailure`). The timer holds nothing: `owe()` does.
 */
const poll = new StatusPoll(pollWaits);

function pollWaits(): boolean {
  const lib = opencl().symbols;
  if (guards.size !== 0) drainGuards();
  waits.forEach((wait, id) => {
    if (!wait.dropped) {
      const status = infoU32("clGetEventInfo", lib.clGetEventInfo, wait.handle, EventInfo.COMMAND_EXECUTION_STATUS) | 0;
      if (status >= 0) return;
      wait.settle(status);
    }
    waits.delete(id);
    if (wait.owes) paid();
  });
  for (let i = strays.length - 1; i >= 0; i--) {
    const stray = strays[i];
    // A marker whose context could not be adopted at the edge of the stack (markerEnded): adopted
    // here, so that the context's native release still comes last, off the JS thread.
    if (!stray.adopted) {
      cls.adopt(stray.context);
      stray.adopted = true;
    }
    if ((infoU32("clGetEventInfo", lib.clGetEventInfo, stray.handle, EventInfo.COMMAND_EXECUTION_STATUS) | 0) > 0) {
      continue;
    }
    strays.splice(i, 1);
    lib.clReleaseEvent(stray.handle);
    cls.disown(stray.context);
  }
  return waits.size > 0 || strays.length > 0 || guards.size > 0;
}

const waitTrampoline = trampolines.eventWait((event, status, id) => {
  const wait = waits.get(id);
  // A dropped wait's cl_event is a stray, the poll's to release.
  if (wait === undefined || wait.dropped || backend.address(event) !== wait.address) return;
  // Paid while the entry is still in the table, and marked paid after: inside clSetEventCallback
  // at the edge of the stack (PoCL calls back in the call) paid() may throw, and the entry left
  // owing is then the poll's to pay (see waitFor), not a debt lost for ever.
  if (wait.owes) {
    paid();
    wait.owes = false;
  }
  waits.delete(id);
  // Settling only queues the promise's reactions: no program code runs inside the driver's call.
  wait.settle(status);
});

/**
 * `wait()`'s native wait, given what it needs of the event: never the event object itself. It owns
 * a reference to the cl_event `handle` and one to `context` (see `adopt`), both let go once the
 * command ended. A failed command rejects it, unless `failed` says what to wait for instead.
 */
function waitFor(
  handle: Pointer,
  context: Context,
  after: Promise<void> | undefined,
  tracker: CommandTracker | undefined,
  seq: number,
  failed: (() => Promise<void>) | undefined,
): Promise<void> {
  let settle: ((status: number) => void) | undefined;
  const completed = new Promise<number>((resolve) => (settle = resolve));
  let wait: Wait | undefined;
  try {
    executorRan(settle, completed);
    // clWaitForEvents flushes the event's queue first: without it, a driver may hold the command
    // back (NVIDIA submits on a flush), and its callback would never come.
    tracker?.flush();
    poll.start();
    const entry: Wait = { settle: settle!, handle, address: backend.address(handle), owes: false, dropped: false };
    const id = waits.add(entry);
    wait = entry;
    // The loop stays alive until the callback came, as it did while a thread waited.
    owe();
    entry.owes = true;
    // The guarded binding: PoCL calls back inside the call when the event has completed already.
    const status = opencl().symbols.clSetEventCallback(handle, ExecutionStatus.COMPLETE, waitTrampoline(), id);
    if (status !== OpenCLStatus.CL_SUCCESS) throw new OpenCLError("clSetEventCallback", status);
  } catch (error) {
    // A promise whose executor could not run rejected, and executorRan's own call may have run
    // out of stack before it handled that (Deno: an uncaught RangeError).
    if (settle === undefined) completed.catch(noop);
    // The poll lets go of the entry and pays what it owes, on a fresh stack: here, at the edge of
    // the stack, paid() threw after the entry left the table, and the loop was held for ever (a
    // hostile pass, all three runtimes; test/fixtures/stack-limit.ts "wait"). A store cannot throw.
    if (wait !== undefined) wait.dropped = true;
    // No callback will settle it: the cl_event and the context go to the poll, released once the
    // command ended. An element store makes no call, so it cannot run out of stack here; without a
    // poll running (its timer could not be made here), the next wait's poll releases them.
    strays[strays.length] = { handle, context, adopted: true };
    after?.catch((e) => reportCallbackError(e, "svmFree"));
    return Promise.reject(error);
  }
  return waitEnd(completed, handle, context, after, tracker, seq, failed);
}

/**
 * @internal `queue.finish()`'s wait: resolves once the command of `marker` (a marker with no wait
 * list, whose cl_event it owns) completed; if it failed, with what `failed` returns. The marker
 * fails when a command before it failed while it was queued (PoCL 3.1), and then says nothing of
 * the commands before that one: PoCL fails a command whose wait list failed, and every command
 * after it, at once, while a command enqueued earlier may still be queued.
 */
export function markerEnded(
  marker: Pointer,
  context: Context,
  tracker: CommandTracker,
  seq: number,
  failed: () => Promise<void>,
): Promise<void> {
  try {
    cls.adopt(context);
  } catch (error) {
    // At the edge of the stack: the marker's cl_event is the poll's, released once its command
    // ended, its context adopted there (a CI run: the adoption threw, the marker was never
    // released, and finish() rejected; test/fixtures/stack-limit.ts "finish"). A store makes no
    // call; the next wait's poll takes it if none runs now.
    strays[strays.length] = { handle: marker, context, adopted: false };
    throw error;
  }
  return waitFor(marker, context, undefined, tracker, seq, failed);
}

async function waitEnd(
  completed: Promise<number>,
  handle: Pointer,
  context: Context,
  after: Promise<void> | undefined,
  tracker: CommandTracker | undefined,
  seq: number,
  failed: (() => Promise<void>) | undefined,
): Promise<void> {
  tracker?.waitStarted(seq);
  let status = await completed;
  // PoCL 3.1 calls a command whose wait list failed back with CL_COMPLETE: its status says the
  // truth (-14, what clWaitForEvents answers for it; test/differential.spec.ts).
  if (status === ExecutionStatus.COMPLETE) {
    try {
      status = infoU32("clGetEventInfo", opencl().symbols.clGetEventInfo, handle, EventInfo.COMMAND_EXECUTION_STATUS) |
        0;
    } catch {
      // Unreadable: the callback's word stands, and the wait still lets go of what it holds below.
    }
  }
  tracker?.waitEnded(seq, status === ExecutionStatus.COMPLETE);
  opencl().symbols.clReleaseEvent(handle);
  cls.disown(context);
  if (status !== ExecutionStatus.COMPLETE) {
    if (failed !== undefined) return failed();
    // This wait rejects with the command's failure; a callback exception still reaches the program.
    after?.catch((error) => reportCallbackError(error, "svmFree"));
    // What clWaitForEvents answers for a command that failed: the same error as before, and as C's.
    throw new OpenCLError(
      "clWaitForEvents",
      OpenCLStatus.CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST,
      // The command's own word: a negative status, often not a cl.h error (PoCL's -1 is not CL_DEVICE_NOT_FOUND).
      `the command's execution status is ${status}`,
    );
  }
  await after;
}

function noop(): void {}

const noWait: { count: number; list: BigUint64Array | null } = Object.freeze({ count: 0, list: null });
const noEvents: readonly Event[] = Object.freeze([]);

/**
 * The events of a `waitFor` option, each element read once (a getter runs here) and checked. A
 * call reads all its arguments before it takes any native handle, `waitHandles` among them: a
 * getter may release what the call uses, which must then be a ReleasedError, not a freed handle
 * in C. Another context's event is left to the driver, which answers CL_INVALID_CONTEXT as it
 * does in C (test/differential.spec.ts).
 */
export function waitEvents(events: unknown): readonly Event[] {
  if (events === undefined) return noEvents;
  if (!Array.isArray(events)) throw new TypeError(`waitFor must be an array of cl.Event, got ${show(events)}`);
  const n = listLength(events, "waitFor");
  if (n === 0) return noEvents;
  const out: Event[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const e = events[i];
    if (!Event[genuine](e)) throw new TypeError(`waitFor[${i}] is not a cl.Event, got ${show(e)}`);
    out[i] = e;
  }
  return out;
}

/**
 * The `cl_event *` wait list of `events` for the enqueue `fn`, taken once no getter of the call can
 * run any more. An event that already failed is refused, with the error C's blocking calls give
 * for it: PoCL 3.1 enqueued the command and never ran it, nor any later command of its queue
 * (their waits and finish() never settled), and NVIDIA refuses the enqueue with the failed event's
 * status for an error code (-9 read as CL_IMAGE_FORMAT_MISMATCH). One status read per event.
 */
export function waitHandles(
  events: readonly Event[],
  fn: string,
  basicQueue: Pointer | null = null,
): { count: number; list: BigUint64Array | null } {
  if (events.length === 0) {
    if (pendingCross !== null || pendingGates !== null) dropPending();
    return noWait;
  }
  const handles = new Array<Pointer>(events.length);
  const getInfo = opencl().symbols.clGetEventInfo;
  for (let i = 0; i < events.length; i++) {
    const handle = Event[handleOf](events[i]);
    const status = infoU32("clGetEventInfo", getInfo, handle, EventInfo.COMMAND_EXECUTION_STATUS) | 0;
    if (status < 0) {
      throw new OpenCLError(
        fn,
        OpenCLStatus.CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST,
        `waitFor[${i}] failed (its execution status is ${status}): a command behind it would never run`,
      );
    }
    if (basicQueue !== null && status > 0 && !commandOf(handle, basicQueue)) {
      throw new OpenCLError(
        fn,
        OpenCLStatus.CL_INVALID_OPERATION,
        `waitFor[${i}] has not completed (execution status ${status}), and this queue's device is PoCL's basic driver, ` +
          "which deadlocks when an event one of its commands waits for completes later (a user event's setStatus, " +
          "a command of another queue ending: PoCL issue 1177): wait for it first (await its wait()), or use a pthread device",
      );
    }
    handles[i] = handle;
    if (openGates.has(handle) || (guarded.size !== 0 && guarded.has(handle))) gatedWait = true;
  }
  if (pendingCross !== null || pendingGates !== null) dropPending();
  // Its command may be guarded (see FailureGuard): what the guard needs, taken now. Not where no
  // queue has a guard (NVIDIA): a retain and a release per listed event for nothing.
  if (anyGuard && (gatedWait || guards.size !== 0)) {
    const s = opencl().symbols;
    for (const h of handles) {
      if (openGates.has(h)) (pendingGates ??= []).push(h);
      else if (s.clRetainEvent(h) === OpenCLStatus.CL_SUCCESS) (pendingCross ??= []).push(h);
    }
  }
  // The count is the list's own: C reads exactly what was built.
  const list = pointerArray(handles);
  return { count: list.length, list };
}
