/** Embree devices: the parent of scenes, and the owner of the memory monitor and budget. */
import type { Pointer } from "../../ffi/types.ts";
import { finalizerState, SafetyNet } from "../callbacks.ts";
import { ReleasedError } from "../errors.ts";
import { boolean, callable, integer, keys, options as checkOptions, own, show } from "../check.ts";
import { DeviceProperty, embree, type Version, versionFrom } from "./native.ts";
import { debts, DeviceState, type MemoryMonitor, type MemoryStats, settleDebts } from "./state.ts";
import { Scene } from "./scene.ts";
import { refuseInWorker } from "../worker.ts";

import { closeStatics, deviceState, fromFactory } from "../internal.ts";

const deviceKeys = keys("accounting");

const net = new SafetyNet<{ handle: Pointer; state: DeviceState; refs: number }, Device>(({ handle, state, refs }) => {
  // The references retain() added first (Embree only counts them down), then the last one, which
  // the native device waits for with its scenes.
  for (let i = 1; i < refs; i++) embree().symbols.rtcReleaseDevice(handle);
  state.deviceHeld = false;
  debts.owed = true;
  state.settle();
}, (device) => Device[finalizerState](device));

/** Options of `rtc.newDevice`. */
export interface DeviceOptions {
  /**
   * Account the device's memory (`device.memory`) from its creation. Without it, accounting starts
   * at the first `setMemoryMonitorFunction(fn)` or `setMemoryBudget(n)`: until then memlife installs
   * no native monitor, and commits cost what the raw FFI call costs.
   */
  accounting?: boolean;
}

/**
 * An Embree device (rtcNewDevice). memlife's native monitor, which feeds `memory`, the budget and
 * your monitor, is installed when one of them is first needed (or at once with `{ accounting: true }`)
 * and then stays for the device's life. A device outlives its scenes: releasing it leaves them
 * usable, and the monitor keeps seeing their memory until they are released too.
 * @example
 * import { rtc } from "memlife";
 * using device = rtc.newDevice("threads=0", { accounting: true });
 * device.setMemoryBudget(64 << 20);
 * using scene = device.newScene();
 * scene.addTriangleMesh(vertices, indices);
 * await scene.commit(); // rejects with RTC_ERROR_OUT_OF_MEMORY past 64 MiB
 */
export class Device {
  #handle: Pointer | null;
  #refs = 1;
  readonly #state: DeviceState;
  /** The configuration string given to rtcNewDevice. */
  readonly config: string;
  readonly version: Version;

  /** @internal use `rtc.newDevice()`. */
  constructor(config = "", options?: DeviceOptions) {
    if (typeof config !== "string") {
      throw new TypeError(`rtc.newDevice takes a configuration string such as "threads=4", got ${show(config)}`);
    }
    // C would read the string only up to the NUL, silently dropping the rest of the configuration.
    if (config.includes("\0")) {
      throw new TypeError("rtc.newDevice's configuration string must not contain NUL characters");
    }
    // Embree 3.13.5 takes a negative cache size as a huge one, fails to map it with its cache's
    // locks held, and the next device that resizes the cache spins for ever (README, Measured facts).
    // The key as Embree's tokenizer finds it: a whole identifier ([A-Za-z0-9_.]), whatever separates it.
    const negative = /(?:^|[^A-Za-z0-9_.])((?:tessellation_)?cache_size)\s*=\s*-/.exec(config);
    if (negative !== null) {
      throw new RangeError(`rtc.newDevice: ${negative[1]} must not be negative, got ${JSON.stringify(config)}`);
    }
    const accounting = boolean(
      own(checkOptions(options, deviceKeys, "rtc.newDevice options"), "accounting"),
      "accounting",
      false,
    );
    if (accounting) refuseInWorker("rtc.newDevice({ accounting: true })", ["bun", "deno"]);
    // The library first: its load says what is missing (Deno's permissions, Embree itself) before
    // the state's account opens the ledger's library (Deno's raw "Requires ffi access" otherwise).
    embree();
    if (debts.owed) settleDebts();
    this.config = config;
    // The state first, the native device after, and whatever throws from there (a NULL device, or
    // a RangeError at the edge of the stack after rtcNewDevice) gives the state up: `settle`
    // releases what was made (a RangeError after rtcNewDevice lost the device for good).
    const state = new DeviceState();
    try {
      this.#handle = state.create(config, accounting);
      this.version = versionFrom(
        Number(embree().symbols.rtcGetDeviceProperty(this.#handle, DeviceProperty.VERSION)),
      );
    } catch (error) {
      state.deviceHeld = false;
      debts.owed = true;
      try {
        settleDebts();
      } catch {
        // The edge of the stack: the next memlife call settles it.
      }
      throw error;
    }
    this.#state = state;
    try {
      net.add(this);
    } catch {
      // The edge of the stack: the device stays without its safety net, for the program to release.
    }
  }

  /** @internal What the safety net registers (see `finalizerState`). */
  static [finalizerState](device: Device): { handle: Pointer; state: DeviceState; refs: number } | undefined {
    if (device.#handle === null) return undefined;
    return { handle: device.#handle, state: device.#state, refs: device.#refs };
  }

  get alive(): boolean {
    return this.#handle !== null;
  }

  /** @internal */
  #live(): Pointer {
    if (this.#handle === null) throw new ReleasedError("rtc.Device");
    return this.#handle;
  }

  /** @internal Its DeviceState, from the private field (see `deviceState`). */
  static [deviceState](device: Device): DeviceState {
    return device.#state;
  }

  /** A new, empty scene of this device (rtcNewScene). */
  newScene(): Scene {
    if (debts.owed) settleDebts();
    return new Scene(fromFactory, this, this.#live(), this.#state);
  }

  /**
   * rtcGetDeviceProperty, e.g. `DeviceProperty.TASKING_SYSTEM` (128: 0 internal, 1 TBB, 2 PPL).
   * Throws EmbreeError for a property this Embree does not know.
   */
  getProperty(property: number): number {
    // enum RTCDeviceProperty is a C int: 2 ** 32 + 1 would reach Embree as 1, VERSION_MAJOR.
    const value = integer(property, "int", "property (an rtc.DeviceProperty)", 0);
    const handle = this.#live();
    return Number(this.#state.call("rtcGetDeviceProperty", () => embree().symbols.rtcGetDeviceProperty(handle, value)));
  }

  /**
   * Sets the memory monitor (rtcSetDeviceMemoryMonitorFunction), or unsets it with `null`.
   * It runs on the JS thread, one call at a time (a monitor that calls Embree is re-entered by that
   * call's allocations), also for allocations of Embree's worker threads
   * (which wait for its answer); only an explicit `false` refuses, and so does throwing any value.
   * A thrown value reaches the program once: as the `cause` of the EmbreeError of the operation it
   * refused (`commit()` rejects, `addTriangleMesh` throws), else (a throw while memory is freed,
   * e.g. in `release()`, which never throws for it) through `onCallbackError`, else uncaught.
   * A returned promise allows; its rejection goes to `onCallbackError`.
   * Replacing it while a commit runs is fine: each call asks the monitor set at that moment.
   * The first function set starts accounting (see `memory`); `null` leaves it on.
   */
  setMemoryMonitorFunction(monitor: MemoryMonitor | null): void {
    if (monitor !== null) callable(monitor, "the memory monitor", "(bytes, post) => boolean, or null");
    this.#live();
    if (monitor !== null) refuseInWorker("setMemoryMonitorFunction", ["bun", "deno"]);
    // The native monitor is memlife's and stays once installed: only the JS side changes.
    this.#state.monitor = monitor;
    if (monitor !== null) this.#state.startAccounting();
  }

  /**
   * Refuses every allocation that would take `memory.bytes` over `bytes` (RTC_ERROR_OUT_OF_MEMORY);
   * `null` removes the budget. A monitor, when set, is asked first and sees every call, those the
   * budget then refuses included. The budget is applied where the figures are kept: in C, on the
   * allocating thread itself, by the native ledger while no JS monitor is set (Bun's compiled one,
   * the prebuilt library's on Deno and Node); with a JS monitor, or where there is no native
   * ledger (Workers on Deno and Node), after the monitor answered.
   * A budget starts accounting if it was not on: then `memory.bytes` counts from this call, and
   * memory the device already held is outside the budget (make the device with `{ accounting: true }`
   * for a budget over everything).
   */
  setMemoryBudget(bytes: number | null): void {
    if (bytes !== null) integer(bytes, "size_t", "a memory budget (bytes, or null for none)");
    this.#live();
    if (bytes !== null) refuseInWorker("setMemoryBudget", ["bun", "deno"]);
    this.#state.budget = bytes;
    if (bytes !== null) this.#state.startAccounting();
  }

  get memoryBudget(): number | null {
    return this.#state.budget;
  }

  /**
   * What the native monitor saw since accounting started: `{ accounting, bytes, peak, calls, denied }`,
   * all 0 while `accounting` is false. Readable after `release()` too, since scenes may still free
   * memory: on a device that accounted from the start, `bytes` is back to 0 once every scene is released.
   */
  get memory(): MemoryStats {
    return this.#state.stats;
  }

  /** Adds a reference (rtcRetainDevice); each `retain()` needs its own `release()`. */
  retain(): this {
    const handle = this.#live();
    embree().symbols.rtcRetainDevice(handle);
    this.#refs++;
    net.renew(this);
    return this;
  }

  /**
   * Drops a reference (rtcReleaseDevice). After the last one the device cannot make scenes; its
   * scenes stay usable, and the native device is released after the last of them.
   */
  release(): void {
    if (debts.owed) settleDebts();
    const handle = this.#handle;
    if (handle === null) return;
    const refs = this.#refs;
    if (refs > 1) {
      // Only counts down, with no callback: see Scene.release.
      const release = embree().symbols.rtcReleaseDevice;
      this.#refs = refs - 1;
      try {
        net.renew(this);
        release(handle);
      } catch (error) {
        this.#refs = refs;
        throw error;
      }
      return;
    }
    net.remove(this); // first: what throws must leave the device as it was
    this.#handle = null;
    // Plain stores: from here the device is the state's to release, now or (at the edge of the
    // stack) at the next memlife call.
    const state = this.#state;
    state.deviceHeld = false;
    debts.owed = true;
    state.settle();
  }

  [Symbol.dispose](): void {
    this.release();
  }

  /** The raw RTCDevice. Unsafe: invalid after release; Embree calls on it bypass memlife. */
  get unsafeHandle(): Pointer {
    return this.#live();
  }

  static {
    closeStatics(this);
  }
}
