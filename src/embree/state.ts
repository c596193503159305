/**
 * What memlife keeps in JS for each Embree device: memory accounting, the user's monitor and
 * budget, and the routing of Embree's errors to the operation that raised them. Native code finds
 * it through `user_data`, an id in one table shared by the two process-wide trampolines.
 *
 * A state outlives its Device object: Embree calls the monitor while a scene is released, even
 * after rtcReleaseDevice, so the state leaves the table only once the device and every scene of
 * it are released natively.
 */
import type { Pointer } from "../../ffi/types.ts";
import { LedgerVerdict } from "../../ffi/symbols/embree.ts";
import { backend } from "../backend.ts";
import { headroom, IdTable, reportCallbackError } from "../callbacks.ts";
import { EmbreeError } from "../errors.ts";
import { trampolines } from "../trampolines.ts";
import { embree } from "./native.ts";
import { EmbreeErrorCode } from "./error-codes.ts";

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
  /** Whether `cause` is set: a monitor may throw `undefined`, and that is still the cause. */
  hasCause: boolean;
  /**
   * What the monitor threw during the operation, held until it ends: each exception reaches the
   * program once, as the `cause` of the operation's EmbreeError when it is that, else through
   * onCallbackError (see `reportThrown`).
   */
  thrown: unknown[] | null;
  /**
   * A commit's: the device's count of budget refusals when it started. Its OUT_OF_MEMORY arrives
   * from a TBB worker, after the JS thread's own calls may have taken the refusals as theirs.
   */
  deniedBefore: number;
}

function operation(fn: string, deniedBefore = -1): Operation {
  return {
    fn,
    code: EmbreeErrorCode.RTC_ERROR_NONE as number,
    message: "",
    cause: undefined,
    hasCause: false,
    thrown: null,
    deniedBefore,
  };
}

function failed(op: Operation): boolean {
  return op.code !== EmbreeErrorCode.RTC_ERROR_NONE;
}

/**
 * The operation is over: reports every exception the monitor threw during it that its EmbreeError
 * (if any) does not carry as its cause. An exception thrown again and again (the same value) is
 * one exception.
 */
function reportThrown(op: Operation): void {
  const thrown = op.thrown;
  if (thrown === null) return;
  const seen = new Set<unknown>();
  if (failed(op) && op.hasCause) seen.add(op.cause);
  for (const value of thrown) {
    if (seen.has(value)) continue;
    seen.add(value);
    reportCallbackError(value, "memoryMonitor");
  }
}

/** One native call of an operation (see `DeviceState.calls`): throws the EmbreeError it raised. */
export type Step = <R>(fn: string, run: () => R) => R;
/**
 * For a native call the body made itself (see `DeviceState.calls`): throws the operation's
 * EmbreeError, naming `fn`, if one was raised since the last step.
 */
export type Check = (fn: string) => void;

const states = new IdTable<DeviceState>();

/** The device accounts: the native ledger where the backend has one (Bun's compiled, the prebuilt library's), else JS. */
/** @internal The backend's memory ledger (made on first use): for src/embree/diagnostics.ts. */
export const accounts = trampolines.embreeMonitor((id, bytes, post) => {
  const state = states.get(id);
  return state === undefined ? true : state.onMonitor(bytes, post);
});

const errorFunction = trampolines.embreeError((id, code, str) => {
  // The string is valid only during this call.
  states.get(id)?.onError(code, str === null ? "" : backend.readCString(str));
});

/** rtcCommitScene calls in flight, all devices together: while any runs, releases go off the JS thread. */
let commitsInFlight = 0;

/**
 * At the edge of the stack (a program that recursed until the stack overflowed, catching the
 * RangeError, calls memlife on the way up) any call may throw before its first statement. A native
 * step and the bookkeeping that must follow it are therefore made in one frame, with nothing but
 * plain loads and stores between them (a call there may throw). What still has to be done after
 * (a device released natively once its last reference went, its state forgotten once released) is
 * read from the states themselves: `owed` says some may owe it, and the next memlife call that
 * makes or releases something (or `liveStates`) finishes it first with `settleDebts`. Other modules
 * set `owed` with a plain store (an exported `let` cannot be assigned from outside).
 */
export const debts = { owed: false };

/** Finishes what the edge of the stack left owed (see `debts`): devices released, states forgotten. */
export function settleDebts(): void {
  debts.owed = false;
  try {
    states.forEach(settleOne);
  } catch (error) {
    debts.owed = true;
    throw error;
  }
}

function settleOne(state: DeviceState): void {
  state.settle();
}

/** `settle` where no caller can receive its failure (a release off the JS thread ended): source "release". */
function settleReported(state: DeviceState): void {
  try {
    state.settle();
  } catch (error) {
    reportCallbackError(error, "release");
  }
}

/**
 * Deno's binding of a symbol that may call back into JS is a small JS wrapper (ffi/deno.ts
 * `offFastPath`), whose entry can throw at the edge of the stack, before the native call: these
 * frames, probed first, leave room for it. A bare native function (koffi's, Bun's, Deno's
 * unguarded one) never throws before it ran: once it ran, what it throws comes from a callback
 * inside it that found no stack (the native call is done). A few ns, on Deno only.
 */
const WRAPPED = backend.runtime === "deno";
const WRAPPER_FRAMES = 4;
/** @internal For Scene.addTriangleMesh: see `WRAPPED`. */
export function wrapperRoom(): void {
  if (WRAPPED) headroom(WRAPPER_FRAMES);
}

function noop(): void {}

export class DeviceState {
  readonly id: number;
  /**
   * The RTCDevice, once `create` made it: for installing the monitor while the Device is not
   * released, and for releasing it natively once neither the Device nor any of its scenes holds it.
   */
  #handle: Pointer | null = null;
  /** Whether the native monitor is installed (then it stays: removing it would make `bytes` meaningless). */
  #accounting = false;
  /**
   * Whether the Device object holds the device: its last `release()` clears it (a plain store, so
   * that the edge of the stack cannot stop it between the Device's handle and this).
   */
  deviceHeld = true;
  /**
   * @internal Scenes made and not yet released natively: each holds the device. Public, not `#`:
   * on Bun a `#` field's `++` and `--` in the `finally` after the native call were lost at the
   * edge of the stack (JavaScriptCore; a count off by one or two per run, the device kept for
   * ever), where a plain property's never were.
   */
  sceneCount = 0;
  /** Whether rtcReleaseDevice ran, or runs now (then the state leaves the table: see `settle`). */
  #gone = false;
  /** An rtcReleaseDevice off the JS thread has not returned yet: the state stays until it has. */
  #releasingAsync = false;
  /**
   * The native scene `newScene` made last, or null: set in the frame of rtcNewScene, whatever is
   * thrown after it, so that the Scene whose constructor caught a RangeError owns it (see Scene).
   */
  made: Pointer | null = null;
  /**
   * The handle `releaseScene` took last: set in the frame of rtcReleaseScene (or before its
   * release off the JS thread), whatever is thrown after, so that a Scene whose release threw
   * knows whether the native release is still its to make.
   */
  releasing: Pointer | null = null;
  #monitor: MemoryMonitor | null = null;
  #budget: number | null = null;
  /** Budget refusals already given a cause: a newer one behind an OUT_OF_MEMORY is that error's cause. */
  #budgetDeniedSeen = 0;
  /** Monitor calls answered inside one of our synchronous native calls (on the JS thread), and relayed from other threads. */
  direct = 0;
  relayed = 0;
  /** The synchronous native call running on the JS thread now, if any. */
  #syncOp: Operation | null = null;
  /** The commit in flight: commits of one device run one at a time, so that every relayed error has one owner. */
  #commitOp: Operation | null = null;
  /** The account as the native release left it: read from here once its id may be another device's. */
  #final: ReturnType<ReturnType<typeof accounts>["read"]> | null = null;
  #commitChain: Promise<void> = Promise.resolve();

  /**
   * Takes an id and an account; `create` makes the native device. In the table from here: a state
   * whose Device never came to be (a failure, or the edge of the stack) is settled by `settle`.
   */
  constructor() {
    this.id = states.add(this);
    try {
      accounts().reset(this.id);
    } catch (error) {
      // Plain stores: the caller never gets this state, so it gives itself up.
      this.deviceHeld = false;
      debts.owed = true;
      throw error;
    }
  }

  /**
   * rtcNewDevice, and the handle kept in the same frame. Then the error function, and the monitor
   * only if `accounting` is asked for: with it installed, each allocation of a commit is a round trip from a TBB worker to the JS
   * thread, which makes commits several times slower (README, "Measured facts behind the code").
   * A device nobody watches commits at the raw FFI's speed; a native ledger (Bun's, and Deno's and
   * Node's prebuilt one) spares even accounting and budget the round trip. Whatever throws, the
   * caller gives the state up (`deviceHeld = false`), and `settle` releases what was made.
   */
  create(config: string, accounting: boolean): Pointer {
    const lib = embree();
    // Nothing calls back into JS inside rtcNewDevice (no error function yet): if it returned, its
    // handle is stored before anything else can throw.
    const handle = lib.symbols.rtcNewDevice(config) as Pointer | null;
    this.#handle = handle;
    if (handle === null) {
      // No device, so no error function: the code is in Embree's per-thread slot, on this thread.
      // NULL with no code set is still a failure (RTC_ERROR_NONE read "no error").
      const code = (lib.symbols.rtcGetDeviceError(null) as number) || EmbreeErrorCode.RTC_ERROR_UNKNOWN;
      const last = lib.symbols.rtcGetDeviceLastErrorMessage?.(null) as Pointer | null | undefined;
      // Embree 3 has no message for it. Its two NULLs without one: a configuration it cannot
      // parse, or no pthread key left (a device takes one; a process has 1024, PTHREAD_KEYS_MAX):
      // past about 1000 live devices a good configuration failed with this very sentence.
      const message = last
        ? backend.readCString(last)
        : `cannot create a device with the configuration ${JSON.stringify(config)} (Embree gives no reason: ` +
          `a configuration it cannot parse, or no thread-local key left for one more device, of the ` +
          `process's 1024, with ${states.size - 1} devices alive)`;
      throw new EmbreeError("rtcNewDevice", code, message);
    }
    lib.symbols.rtcSetDeviceErrorFunction(handle, errorFunction(), this.id);
    if (accounting) this.startAccounting();
    return handle;
  }

  get accounting(): boolean {
    return this.#accounting;
  }

  /**
   * Installs the native monitor, for the rest of the device's life; the caller has checked that
   * the device is not released. Safe while a commit of the device runs: Embree reads the function
   * pointer and `user_data` per allocation, each an aligned word, and the one written first (the
   * function) with the old `user_data` (0) finds no account and answers true.
   */
  startAccounting(): void {
    if (this.#accounting) return;
    embree().symbols.rtcSetDeviceMemoryMonitorFunction(this.#handle, accounts().callback, this.id);
    this.#accounting = true;
  }

  get monitor(): MemoryMonitor | null {
    return this.#monitor;
  }

  /** Only calls with a JS monitor need JS: with a native ledger, the others never leave native code. */
  set monitor(monitor: MemoryMonitor | null) {
    this.#monitor = monitor;
    accounts().setForward(this.id, monitor !== null);
  }

  get budget(): number | null {
    return this.#budget;
  }

  set budget(budget: number | null) {
    this.#budget = budget;
    accounts().setBudget(this.id, budget);
  }

  /**
   * rtcNewScene: the new scene holds the device. Counted, and kept in `made`, in the frame of the
   * native call, whatever is thrown after it (the caller owns `made` then). Throws the EmbreeError
   * of a NULL scene.
   */
  newScene(): Pointer {
    const newScene = embree().symbols.rtcNewScene;
    const outer = this.#syncOp;
    const op = operation("rtcNewScene");
    wrapperRoom();
    let scene: Pointer | null = null;
    this.#syncOp = op;
    try {
      scene = newScene(this.#handle) as Pointer | null;
    } finally {
      // Also when the call threw after it made the scene (a callback inside that found no stack):
      // then `scene` stays null, as when it made none.
      this.#syncOp = outer;
      if (scene !== null) this.sceneCount++;
      this.made = scene;
    }
    try {
      if (op.thrown !== null) reportThrown(op);
      if (scene === null) {
        if (failed(op)) throw errorOf(op);
        throw new EmbreeError("rtcNewScene", EmbreeErrorCode.RTC_ERROR_UNKNOWN, "returned NULL");
      }
    } finally {
      // A call above that made a scene of this device (a callback error's handler) wrote its own.
      this.made = scene;
    }
    // A scene with an error raised during its creation is still a scene: the caller gets it.
    return scene;
  }

  /**
   * A scene's last reference was released: frees it natively (on the JS thread when no commit
   * runs: Embree 3.13 frees on the calling thread, so the monitor runs inside and `memory` is up
   * to date at once; off it otherwise, so that a release that had to wait for a busy TBB worker
   * could not deadlock with it), then the device if that was the last holder. Once past the native
   * call (`releasing` is `handle`), whatever throws, the scene's reference is dropped.
   */
  releaseScene(handle: Pointer): void {
    if (commitsInFlight !== 0) return this.#releaseSceneAsync(handle);
    const release = embree().symbols.rtcReleaseScene;
    const outer = this.#syncOp;
    const op = operation("rtcReleaseScene");
    wrapperRoom();
    this.#syncOp = op;
    this.releasing = handle;
    try {
      release(handle);
    } finally {
      // The native release ran, also when it threw (a callback inside found no stack).
      this.#syncOp = outer;
      this.releasing = handle;
      if (--this.sceneCount === 0 && !this.deviceHeld) debts.owed = true;
    }
    try {
      if (this.sceneCount === 0 && !this.deviceHeld) this.settle();
      if (op.thrown !== null) reportThrown(op);
      if (failed(op)) throw errorOf(op);
    } finally {
      this.releasing = handle;
    }
  }

  #releaseSceneAsync(handle: Pointer): void {
    // Taken from here: should the edge of the stack stop this call after the release was queued,
    // the scene must not release it again (a leak rather than a double free).
    this.releasing = handle;
    embree().async.rtcReleaseScene(handle).then(() => {
      if (--this.sceneCount === 0 && !this.deviceHeld) {
        debts.owed = true;
        settleReported(this);
      }
    }, (error) => {
      // Only the backend can fail here (no thread to run the call on): the handle stays alive
      // natively, so the state stays too. No caller can receive the failure: source "release".
      reportCallbackError(error, "release");
    });
  }

  /**
   * Finishes what is owed: releases the native device once neither the Device nor a scene holds
   * it (the native device goes after the last of its scenes: Embree 3.13's scene drops its device
   * reference before it frees its BVH through that device, so a device released natively first,
   * on the JS thread or on another thread while the scene's release waits for a relayed monitor
   * call, is read after it was freed), and forgets the state once it is released. Throws the
   * EmbreeError of rtcReleaseDevice. A no-op while the state has nothing to do, or while one of its
   * native calls runs on the JS thread (its caller finishes).
   */
  settle(): void {
    if (this.#syncOp !== null) {
      debts.owed = true;
      return;
    }
    let op: Operation | null = null;
    if (!this.#gone) {
      if (this.deviceHeld || this.sceneCount > 0) return;
      const handle = this.#handle;
      if (handle === null) this.#gone = true; // never made
      else if (commitsInFlight !== 0) {
        this.#gone = true;
        this.#releasingAsync = true;
        embree().async.rtcReleaseDevice(handle).then(() => {
          this.#releasingAsync = false;
          settleReported(this);
        }, (error) => {
          // As for a scene (see #releaseSceneAsync): the device stays, and its state.
          reportCallbackError(error, "release");
        });
        return;
      } else {
        const release = embree().symbols.rtcReleaseDevice;
        const outer = this.#syncOp;
        op = operation("rtcReleaseDevice");
        wrapperRoom();
        this.#syncOp = op;
        this.#gone = true;
        try {
          release(handle);
        } finally {
          this.#syncOp = outer;
        }
      }
    }
    if (this.#releasingAsync) return;
    if (states.get(this.id) === this) {
      // The account is the next device's once the id is free: the released device keeps its figures.
      this.#final = accounts().read(this.id);
      states.delete(this.id);
    }
    if (op === null) return;
    if (op.thrown !== null) reportThrown(op);
    if (failed(op)) throw errorOf(op);
  }

  onMonitor(bytes: number, post: boolean): boolean {
    const op = this.#syncOp ?? this.#commitOp;
    if (this.#syncOp !== null) this.direct++;
    else this.relayed++;
    let answer = true;
    let cause: unknown;
    let hasCause = false;
    const monitor = this.#monitor;
    if (monitor !== null) {
      let result: unknown;
      let threw = false;
      try {
        result = monitor(bytes, post);
      } catch (error) {
        // Any value thrown, undefined included, refuses.
        threw = true;
        answer = false;
        cause = error;
        hasCause = true;
        if (op === null) reportCallbackError(error, "memoryMonitor");
        else (op.thrown ??= []).push(error);
      }
      // Only an explicit false refuses, and Embree needs the answer now: a promise allows.
      if (!threw && result === false) answer = false;
      else if (!threw) settleLater(result);
    }
    // The budget is checked where the figures are, which may be native code.
    const verdict = accounts().apply(this.id, bytes, post, answer);
    if (verdict === LedgerVerdict.budgetRefused) {
      const budgetError = this.#budgetRefusal(op);
      if (!hasCause && budgetError !== undefined) {
        cause = budgetError;
        hasCause = true;
      }
    }
    if (verdict !== LedgerVerdict.allowed && bytes > 0 && op !== null && !op.hasCause && hasCause) {
      op.cause = cause;
      op.hasCause = true;
    }
    return verdict === LedgerVerdict.allowed;
  }

  /**
   * The RangeError for the latest budget refusal, if one happened since the last asked for, or,
   * for a commit, since it started: a refused add on the JS thread took the count first while a
   * commit's refusal on a TBB worker was still on its way (the commit lost its cause).
   */
  #budgetRefusal(op: Operation | null): RangeError | undefined {
    const f = accounts().read(this.id);
    const during = op !== null && op.deniedBefore >= 0 && f.budgetDenied > op.deniedBefore;
    if (f.budgetDenied === this.#budgetDeniedSeen && !during) return undefined;
    this.#budgetDeniedSeen = f.budgetDenied;
    return new RangeError(
      `memory budget exceeded: ${f.lastRefused} more bytes would make ${
        f.lastRefusedLive + f.lastRefused
      }, over the budget of ${this.#budget}`,
    );
  }

  onError(code: number, message: string): void {
    // Inside a synchronous call nothing is relayed (the JS thread is busy), so a call then is that
    // call's own; any other comes from a worker of the commit in flight.
    // An error outside any operation memlife started has no caller to reach: none is known to happen.
    const op = this.#syncOp ?? this.#commitOp;
    if (op !== null && op.code === EmbreeErrorCode.RTC_ERROR_NONE) {
      op.code = code;
      op.message = message;
      // A refusal settled natively (no JS monitor) reached JS only as this error.
      if (code === EmbreeErrorCode.RTC_ERROR_OUT_OF_MEMORY && !op.hasCause) {
        const budgetError = this.#budgetRefusal(op);
        if (budgetError !== undefined) {
          op.cause = budgetError;
          op.hasCause = true;
        }
      }
    }
  }

  /** Runs a synchronous native call on the JS thread and throws the EmbreeError it raised. */
  call<T>(fn: string, run: () => T): T {
    // `calls` with one step, without its closures: intersect1 comes here once per ray.
    const outer = this.#syncOp;
    const op = operation(fn);
    this.#syncOp = op;
    let result: T;
    try {
      result = run();
    } finally {
      this.#syncOp = outer;
      if (op.thrown !== null) reportThrown(op);
    }
    if (failed(op)) throw errorOf(op);
    return result;
  }

  /**
   * Runs synchronous native calls on the JS thread as one operation: `step(fn, run)` makes one and
   * throws the EmbreeError it raised (the first of the operation). What the monitor threw anywhere
   * in it, a cleanup in a `finally` included, is reported once when `body` ends, unless it is that
   * error's cause: the program that caught the error has it.
   */
  calls<T>(body: (step: Step, check: Check) => T): T {
    const outer = this.#syncOp;
    const op = operation("");
    this.#syncOp = op;
    try {
      return body((fn, run) => {
        const before = failed(op);
        if (!before) op.fn = fn;
        const result = run();
        if (!before && failed(op)) throw errorOf(op);
        return result;
      }, (fn) => {
        if (!failed(op)) return;
        op.fn = fn;
        throw errorOf(op);
      });
    } finally {
      this.#syncOp = outer;
      if (op.thrown !== null) reportThrown(op);
    }
  }

  /** Runs `run` (an async native call) after the device's earlier commits; rejects with the EmbreeError it raised. */
  commit(fn: string, run: () => Promise<unknown>): Promise<void> {
    const turn = this.#commitChain.then(() => this.#commit(fn, run));
    this.#commitChain = turn.then(noop, noop);
    return turn;
  }

  async #commit(fn: string, run: () => Promise<unknown>): Promise<void> {
    const op = operation(fn, accounts().read(this.id).budgetDenied);
    this.#commitOp = op;
    commitsInFlight++;
    try {
      await run();
    } finally {
      commitsInFlight--;
      this.#commitOp = null;
      // Every relayed callback ran before the native call returned: its caller waited for the
      // answer. A failure of the backend (not Embree's) reports what the monitor threw all the same.
      reportThrown(op);
    }
    if (failed(op)) throw errorOf(op);
  }

  get stats(): MemoryStats {
    const { bytes, peak, calls, denied } = this.#final ?? accounts().read(this.id);
    return { accounting: this.#accounting, bytes, peak, calls, denied };
  }

  /** Calls settled in native code without JS (a backend with a native ledger, and no JS monitor). */
  get settledNatively(): number {
    return (this.#final ?? accounts().read(this.id)).native;
  }
}

function errorOf(op: Operation): EmbreeError {
  return new EmbreeError(op.fn, op.code, op.message, op.hasCause ? { cause: op.cause } : undefined);
}

/**
 * A promise (or thenable) the monitor returned: its rejection is reported like an exception thrown
 * outside any operation, and so is a `then` that throws (or a getter of it): as a rejected promise,
 * not as a throw of the monitor, which would refuse.
 */
function settleLater(result: unknown): void {
  if ((typeof result !== "object" || result === null) && typeof result !== "function") return;
  // A resolving function reads `then` once and calls it with real resolving functions, later, on a
  // job of its own: a thenable that fulfils, rejects twice or throws settles once, as a promise does.
  // Not Promise.resolve: it reads a real promise's `constructor` at once, and a getter there that
  // threw escaped the monitor's trampoline (Node hung in the commit; Bun died, Deno failed the call).
  new Promise((resolve) => resolve(result)).then(undefined, (error) => reportCallbackError(error, "memoryMonitor"));
}

/** Test and diagnostics only: how many device states are still in the table (once what is owed is settled). */
export function liveStates(): number {
  if (debts.owed) settleDebts();
  return states.size;
}
