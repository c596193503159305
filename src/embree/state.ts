/**
 * What memlife keeps in JS for each Embree device: memory accounting, the user's monitor and
 * budget, and the routing of Embree's errors to the operation that raised them. Native code finds
 * it through `user_data`, an id in one table shared by the two process-wide trampolines.
 *
 * A state outlives its Device object: Embree calls the monitor while a scene is released, even
 * after rtcReleaseDevice, so the state leaves the table only once the device and every scene of
 * it are released natively.
 */
import type { Callback, Pointer } from "../../ffi/types.ts";
import { embreeCallbacks } from "../../ffi/symbols/embree.ts";
import { backend } from "../backend.ts";
import { IdTable, reportCallbackError } from "../callbacks.ts";
import { EmbreeError } from "../errors.ts";
import { embree } from "./native.ts";

/**
 * Called for every allocation (`bytes > 0`) and deallocation (`bytes < 0`) of a device, before
 * (`post === false`) or after (`post === true`) it happens. Returning `false` (or throwing) for an
 * allocation makes Embree cancel the operation with RTC_ERROR_OUT_OF_MEMORY; any other return
 * value, `undefined` included, lets it go on.
 */
export type MemoryMonitor = (bytes: number, post: boolean) => boolean | void;

export interface MemoryStats {
  /**
   * Whether memlife's native monitor is installed, so that these figures count. It is installed
   * when the device is made with `{ accounting: true }`, or at the first `setMemoryMonitorFunction(fn)`
   * or `setMemoryBudget(n)`, and stays for the device's life; before that every figure is 0.
   */
  readonly accounting: boolean;
  /**
   * Live bytes: the sum of every monitor call's `bytes` since accounting started, less refused
   * pre-allocation calls (the seed's rule). Memory allocated before accounting started and freed
   * after counts only its free, so this can go below 0 on a device that did not account from the start.
   */
  readonly bytes: number;
  /** The highest `bytes` ever reached. */
  readonly peak: number;
  /** Monitor calls so far. */
  readonly calls: number;
  /** Allocations refused, by the budget or by the monitor. */
  readonly denied: number;
}

/** One native call (or commit) in progress: the first Embree error it raised, and why memory was refused. */
interface Operation {
  fn: string;
  code: number;
  message: string;
  /** The monitor's exception, or the budget's RangeError, behind an RTC_ERROR_OUT_OF_MEMORY. */
  cause: unknown;
}

const states = new IdTable<DeviceState>();

let monitorTrampoline: Callback | undefined;
let errorTrampoline: Callback | undefined;

function trampolines(): { monitor: Callback; error: Callback } {
  monitorTrampoline ??= backend.callback(embreeCallbacks.memoryMonitor, (id: number, bytes: number | bigint, post: boolean) => {
    const state = states.get(id);
    return state === undefined ? true : state.onMonitor(Number(bytes), post);
  });
  errorTrampoline ??= backend.callback(embreeCallbacks.error, (id: number, code: number, str: Pointer | null) => {
    // The string is valid only during this call.
    states.get(id)?.onError(code, str === null ? "" : backend.readCString(str));
  });
  return { monitor: monitorTrampoline, error: errorTrampoline };
}

/** rtcCommitScene calls in flight, all devices together: while any runs, releases go off the JS thread. */
let commitsInFlight = 0;

function noop(): void {}

export class DeviceState {
  readonly id: number;
  /** The RTCDevice, for installing the monitor later; only used while the Device is not released. */
  readonly #handle: Pointer;
  /** Whether the native monitor is installed (then it stays: removing it would make `bytes` meaningless). */
  #accounting = false;
  /** 1 while the Device is not released, plus one per scene not yet released natively. */
  #refs = 1;
  monitor: MemoryMonitor | null = null;
  budget: number | null = null;
  bytes = 0;
  peak = 0;
  calls = 0;
  denied = 0;
  /** Monitor calls answered inside one of our synchronous native calls (on the JS thread), and relayed from other threads. */
  direct = 0;
  relayed = 0;
  /** The synchronous native call running on the JS thread now, if any. */
  #syncOp: Operation | null = null;
  /** The commit in flight: commits of one device run one at a time, so that every relayed error has one owner. */
  #commitOp: Operation | null = null;
  #commitChain: Promise<void> = Promise.resolve();
  /** An error raised outside any operation memlife started (should not happen; kept for diagnosis). */
  lastUnclaimedError: EmbreeError | null = null;

  /**
   * Installs the error function on a new device, and the monitor only if `accounting` is asked for:
   * with it installed, each allocation of a commit is a round trip from a TBB worker to the JS
   * thread (some 20 per build whatever the scene size, ~15-80 us each), which doubled the commit
   * time of a 10k-triangle scene. A device nobody watches commits at the raw FFI's speed.
   */
  constructor(handle: Pointer, accounting: boolean) {
    this.id = states.add(this);
    this.#handle = handle;
    const { error } = trampolines();
    embree().symbols.rtcSetDeviceErrorFunction(handle, error, this.id);
    if (accounting) this.startAccounting();
  }

  get accounting(): boolean {
    return this.#accounting;
  }

  /**
   * Installs the native monitor, for the rest of the device's life; the caller has checked that
   * the device is not released. Safe while a commit of the device runs: Embree reads the function
   * pointer and `user_data` per allocation, each an aligned word, and the one written first (the
   * function) with the old `user_data` (0) finds no state and answers true.
   */
  startAccounting(): void {
    if (this.#accounting) return;
    embree().symbols.rtcSetDeviceMemoryMonitorFunction(this.#handle, trampolines().monitor, this.id);
    this.#accounting = true;
  }

  /** A scene now holds the device natively. */
  hold(): void {
    this.#refs++;
  }

  /** The device or a scene of it was released natively. */
  drop(): void {
    if (--this.#refs === 0) states.delete(this.id);
  }

  onMonitor(bytes: number, post: boolean): boolean {
    this.calls++;
    const op = this.#syncOp ?? this.#commitOp;
    if (this.#syncOp !== null) this.direct++;
    else this.relayed++;
    let ok = true;
    let cause: unknown;
    const budget = this.budget;
    if (bytes > 0 && budget !== null && this.bytes + bytes > budget) {
      ok = false;
      cause = new RangeError(`memory budget exceeded: ${bytes} more bytes would make ${this.bytes + bytes}, over the budget of ${budget}`);
    }
    const monitor = this.monitor;
    if (monitor !== null) {
      try {
        if (monitor(bytes, post) === false) ok = false;
      } catch (error) {
        ok = false;
        cause = error;
        reportCallbackError(error, "memoryMonitor");
      }
    }
    // The seed: a refused call before the allocation is not counted (it never happens); everything else is.
    if (ok || post || bytes <= 0) {
      this.bytes += bytes;
      if (this.bytes > this.peak) this.peak = this.bytes;
    }
    if (!ok && bytes > 0) {
      this.denied++;
      if (op !== null && op.cause === undefined && cause !== undefined) op.cause = cause;
    }
    return ok;
  }

  onError(code: number, message: string): void {
    // Inside a synchronous call nothing is relayed (the JS thread is busy), so a call then is that
    // call's own; any other comes from a worker of the commit in flight.
    const op = this.#syncOp ?? this.#commitOp;
    if (op === null) {
      this.lastUnclaimedError = new EmbreeError("(no operation)", code, message);
    } else if (op.code === 0) {
      op.code = code;
      op.message = message;
    }
  }

  /** Runs a synchronous native call on the JS thread and throws the EmbreeError it raised. */
  call<T>(fn: string, run: () => T): T {
    const outer = this.#syncOp;
    const op: Operation = { fn, code: 0, message: "", cause: undefined };
    this.#syncOp = op;
    let result: T;
    try {
      result = run();
    } finally {
      this.#syncOp = outer;
    }
    if (op.code !== 0) throw errorOf(op);
    return result;
  }

  /** Runs `run` (an async native call) after the device's earlier commits; rejects with the EmbreeError it raised. */
  commit(fn: string, run: () => Promise<unknown>): Promise<void> {
    const turn = this.#commitChain.then(() => this.#commit(fn, run));
    this.#commitChain = turn.then(noop, noop);
    return turn;
  }

  async #commit(fn: string, run: () => Promise<unknown>): Promise<void> {
    const op: Operation = { fn, code: 0, message: "", cause: undefined };
    this.#commitOp = op;
    commitsInFlight++;
    try {
      await run();
    } finally {
      commitsInFlight--;
      this.#commitOp = null;
    }
    // Every relayed callback ran before the native call returned: its caller waited for the answer.
    if (op.code !== 0) throw errorOf(op);
  }

  /**
   * Releases a device or scene handle natively, then drops the reference it held. On the JS thread
   * when no commit runs (Embree 3.13 frees on the calling thread, so the monitor runs inside and
   * `memory` is up to date at once); off it otherwise, so that a release that had to wait for a
   * busy TBB worker could not deadlock with it.
   */
  release(fn: "rtcReleaseScene" | "rtcReleaseDevice", handle: Pointer): void {
    const lib = embree();
    if (commitsInFlight === 0) {
      try {
        this.call(fn, () => lib.symbols[fn](handle));
      } finally {
        this.drop();
      }
      return;
    }
    lib.async[fn](handle).then(() => this.drop(), (error) => {
      // Only the backend can fail here (no thread to run the call on): the handle stays alive
      // natively, so the state stays too; the failure surfaces like a callback's exception.
      reportCallbackError(error, "memoryMonitor");
    });
  }

  get stats(): MemoryStats {
    return { accounting: this.#accounting, bytes: this.bytes, peak: this.peak, calls: this.calls, denied: this.denied };
  }
}

function errorOf(op: Operation): EmbreeError {
  return new EmbreeError(op.fn, op.code, op.message, op.cause === undefined ? undefined : { cause: op.cause });
}

/** Test and diagnostics only: how many device states are still in the table. */
export function liveStates(): number {
  return states.size;
}
