/**
 * Embree: devices, scenes, triangle meshes, and the device memory monitor
 * (rtcSetDeviceMemoryMonitorFunction) with accounting and a budget on top.
 * @example
 * import { rtc } from "memlife";
 * using device = rtc.newDevice("threads=0");
 * device.setMemoryMonitorFunction((bytes, post) => bytes < 256 << 20);
 * using scene = device.newScene();
 * scene.addTriangleMesh(vertices, indices);
 * await scene.commit();
 */
import { Device, type DeviceOptions } from "./device.ts";
import type { Version } from "./native.ts";
import { liveStates } from "./state.ts";
import { deviceState } from "../internal.ts";

export { Device, type DeviceOptions } from "./device.ts";
export { Scene, type Hit, type Ray } from "./scene.ts";
export { DeviceProperty, type Version } from "./native.ts";
export type { MemoryMonitor, MemoryStats } from "./state.ts";

/**
 * A new device (rtcNewDevice), e.g. `"threads=4"`, `"threads=0"` (all cores) or `"verbose=1"`.
 * The first call loads Embree: `$EMBREE_LIBRARY`, else Embree 4, else Embree 3.
 * `{ accounting: true }` counts `device.memory` from the start; otherwise accounting starts with
 * the first monitor or budget, and a device with neither commits at the raw FFI's speed.
 * Throws EmbreeError when Embree refuses the configuration, LibraryLoadError when there is no Embree.
 * @example
 * import { rtc } from "memlife";
 * using device = rtc.newDevice("threads=0", { accounting: true });
 * console.log(device.version.string, device.memory.bytes);
 */
export function newDevice(config?: string, options?: DeviceOptions): Device {
  const device = new Device(config, options);
  version ??= device.version;
  return device;
}

/**
 * The Embree that is loaded, `{ major, minor, patch, string, path }` (e.g. "3.13.5" from
 * libembree3.so.3), or null until the first device was made. `load()` makes it known at once.
 * @example
 * import { rtc } from "memlife";
 * console.log(rtc.version ?? "no device yet");
 */
export let version: Version | null = null;

/**
 * Loads Embree (if needed) and returns its version; a throwaway device reads it the first time.
 * @example
 * import { rtc } from "memlife";
 * console.log(rtc.load().string); // "3.13.5", or a LibraryLoadError naming what to install
 */
export function load(): Version {
  if (version === null) newDevice().release();
  return version!;
}

/**
 * Test and diagnostics only: how many of `device`'s monitor calls ran inside one of memlife's
 * synchronous native calls on the JS thread (`direct`), how many came from other threads
 * (`relayed`: TBB workers and the thread that runs a commit), how many never reached JS (`native`:
 * settled by the backend's native ledger, Bun's, while no JS monitor is set; 0 on Deno and Node),
 * and how many device states memlife still keeps (a device's state stays while any of its scenes
 * is alive natively).
 * @example
 * import { rtc } from "memlife";
 * await scene.commit();
 * console.log(rtc.monitorDiagnostics(device)); // { direct: 2, relayed: 20, native: 0, liveDevices: 1 }
 */
export function monitorDiagnostics(device: Device): { direct: number; relayed: number; native: number; liveDevices: number } {
  if (!(device instanceof Device)) throw new TypeError("monitorDiagnostics takes an rtc.Device");
  const state = device[deviceState];
  return { direct: state.direct, relayed: state.relayed, native: state.settledNatively, liveDevices: liveStates() };
}
