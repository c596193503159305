/** Embree devices: the parent of scenes, and the owner of the memory monitor and budget. */
import type { Pointer } from "../../ffi/types.ts";
import { backend } from "../backend.ts";
import { finalizerState, SafetyNet } from "../callbacks.ts";
import { EmbreeError, ReleasedError } from "../errors.ts";
import { boolean, callable, integer, keys, options as checkOptions, own, show } from "../check.ts";
import { DeviceProperty, embree, type Version, versionFrom } from "./native.ts";
import { DeviceState, type MemoryMonitor, type MemoryStats } from "./state.ts";
import { Scene } from "./scene.ts";
import { refuseInWorker } from "../worker.ts";

const RTC_ERROR_UNKNOWN = 1;
import { closeStatics, deviceState, fromFactory } from "../internal.ts";

const deviceKeys = keys("accounting");

const net = new SafetyNet<{ handle: Pointer; state: DeviceState; refs: number }, Device>(({ handle, state, refs }) => {
  // The references retain() added first (Embree only counts them down), then the last one, which
  // the native device waits for with its scenes.
  for (let i = 1; i < refs; i++) embree().symbols.rtcReleaseDevice(handle);
  state.releaseDevice();
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
    const lib = embree();
    const handle = lib.symbols.rtcNewDevice(config) as Pointer | null;
    if (handle === null) {
      // No device, so no error function: the code is in Embree's per-thread slot, on this thread.
      // NULL with no code set is still a failure (RTC_ERROR_NONE read "no error").
      const code = (lib.symbols.rtcGetDeviceError(null) as number) || RTC_ERROR_UNKNOWN;
      const last = lib.symbols.rtcGetDeviceLastErrorMessage?.(null) as Pointer | null | undefined;
      const message = last
        ? backend.readCString(last)
        : `cannot create a device with the configuration ${JSON.stringify(config)}`;
      throw new EmbreeError("rtcNewDevice", code, message);
    }
    this.#handle = handle;
    this.config = config;
    this.#state = new DeviceState(handle, accounting);
    this.version = versionFrom(Number(lib.symbols.rtcGetDeviceProperty(handle, DeviceProperty.VERSION)));
    net.add(this);
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
    const handle = this.#live();
    return new Scene(
      fromFactory,
      this,
      handle,
      this.#state,
      this.#state.call("rtcNewScene", () => embree().symbols.rtcNewScene(handle) as Pointer | null),
    );
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
    const handle = this.#handle;
    if (handle === null) return;
    if (--this.#refs > 0) {
      net.renew(this);
      embree().symbols.rtcReleaseDevice(handle);
      return;
    }
    this.#handle = null;
    net.remove(this);
    this.#state.releaseDevice();
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
