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

export { Device, type DeviceOptions } from "./device.ts";
export { type Hit, type Ray, Scene } from "./scene.ts";
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
