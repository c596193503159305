/** Platforms and devices. OpenCL does not reference-count them (root devices), so they need no release. */
import type { Pointer } from "../../ffi/types.ts";
import { backend } from "../backend.ts";
import { integer, listLength, show } from "../check.ts";
import { closeStatics, deviceList, fromFactory, genuine, handleOf, notByNew } from "../internal.ts";
import { DeviceInfo, DeviceType, PlatformInfo, SVMCapability } from "./constants.ts";
import { check, infoString, infoU32, infoU64, opencl } from "./native.ts";
import { OpenCLStatus } from "./status-codes.ts";

const countSlot = new Uint32Array(new ArrayBuffer(4));

function handles(list: BigUint64Array): Pointer[] {
  return Array.from(list, (address) => backend.fromAddress(address) as Pointer);
}

/** SVM capabilities of a device (CL_DEVICE_SVM_CAPABILITIES); all false before OpenCL 2.0. */
export interface SVMCapabilities {
  readonly coarseGrainBuffer: boolean;
  readonly fineGrainBuffer: boolean;
  readonly fineGrainSystem: boolean;
  readonly atomics: boolean;
}

/**
 * An OpenCL platform (one driver, e.g. PoCL or NVIDIA CUDA).
 * @example
 * import { cl } from "memlife";
 * const [platform] = cl.getPlatforms();
 * console.log(platform?.name, platform?.version, platform?.getDevices(cl.DeviceType.GPU).length);
 */
export class Platform {
  readonly #handle: Pointer;
  /** CL_PLATFORM_NAME, e.g. "Portable Computing Language". */
  readonly name: string;
  readonly vendor: string;
  /** CL_PLATFORM_VERSION, e.g. "OpenCL 3.0 PoCL 3.1". */
  readonly version: string;
  readonly profile: string;
  readonly extensions: readonly string[];
  #devices: Device[] | undefined;

  /** @internal use `cl.getPlatforms()`. */
  constructor(made: typeof fromFactory, handle: Pointer) {
    if (made !== fromFactory) notByNew("cl.Platform", "cl.getPlatforms()");
    const s = opencl().symbols;
    this.#handle = handle;
    this.name = infoString("clGetPlatformInfo", s.clGetPlatformInfo, handle, PlatformInfo.NAME);
    this.vendor = infoString("clGetPlatformInfo", s.clGetPlatformInfo, handle, PlatformInfo.VENDOR);
    this.version = infoString("clGetPlatformInfo", s.clGetPlatformInfo, handle, PlatformInfo.VERSION);
    this.profile = infoString("clGetPlatformInfo", s.clGetPlatformInfo, handle, PlatformInfo.PROFILE);
    this.extensions = infoString("clGetPlatformInfo", s.clGetPlatformInfo, handle, PlatformInfo.EXTENSIONS)
      .split(" ").filter(Boolean);
  }

  /**
   * The platform's devices of a type (default: all).
   * @example const gpus = platform.getDevices(cl.DeviceType.GPU);
   */
  getDevices(type: number = DeviceType.ALL): Device[] {
    // A cl_device_type bit field (cl_ulong). The driver decides which devices a type means:
    // CL_DEVICE_TYPE_DEFAULT is a device the driver picks, whose own type may be CPU only (PoCL).
    integer(type, "size_t", "device type (a cl.DeviceType bit mask)", 1);
    const all = this.#devices ??= this.#query(DeviceType.ALL, undefined);
    return type === DeviceType.ALL ? [...all] : this.#query(type, all);
  }

  /** The devices clGetDeviceIDs gives for `type`, as the Device objects of `known` when given. */
  #query(type: number, known: Device[] | undefined): Device[] {
    const s = opencl().symbols;
    const status = s.clGetDeviceIDs(this.#handle, type, 0, null, countSlot);
    if (status === OpenCLStatus.CL_DEVICE_NOT_FOUND) return [];
    check("clGetDeviceIDs", status);
    const list = new BigUint64Array(new ArrayBuffer(8 * countSlot[0]));
    check("clGetDeviceIDs", s.clGetDeviceIDs(this.#handle, type, countSlot[0], list, null));
    if (known === undefined) return handles(list).map((h) => new Device(fromFactory, h, this));
    return Array.from(list, (address) => known.find((d) => backend.address(Device[handleOf](d)) === address))
      .filter((d): d is Device => d !== undefined);
  }

  /** The raw cl_platform_id. Unsafe: valid for the life of the process, but bypasses every check. */
  get unsafeHandle(): Pointer {
    return this.#handle;
  }
}

/**
 * An OpenCL device with the properties memlife's users ask about most.
 * @example
 * import { cl } from "memlife";
 * const device = cl.defaultDevice();
 * console.log(device.name, device.type, device.globalMemSize, device.svm.fineGrainBuffer);
 */
export class Device {
  readonly #handle: Pointer;
  readonly platform: Platform;
  readonly name: string;
  readonly vendor: string;
  /** CL_DEVICE_VERSION, e.g. "OpenCL 3.0 PoCL ...". */
  readonly version: string;
  readonly driverVersion: string;
  /** "cpu", "gpu", "accelerator", "custom" or "default". */
  readonly type: string;
  /** The cl_device_type bit mask. */
  readonly typeMask: number;
  /** CL_DEVICE_GLOBAL_MEM_SIZE in bytes. */
  readonly globalMemSize: number;
  /** CL_DEVICE_MAX_MEM_ALLOC_SIZE in bytes: the largest buffer or SVM allocation. */
  readonly maxMemAllocSize: number;
  readonly maxComputeUnits: number;
  /** CL_DEVICE_LOCAL_MEM_SIZE in bytes: the `__local` memory one work-group may have, `cl.local()` included. */
  readonly localMemSize: number;
  readonly svm: SVMCapabilities;

  /** @internal Whether `value` is one itself, not a Proxy of one (see `genuine` in internal.ts). */
  static [genuine](value: unknown): value is Device {
    return typeof value === "object" && value !== null && #handle in value;
  }

  /**
   * @internal `devices` read once, each element checked to be a genuine Device: a list read twice
   * could give another object (with another handle) the second time, and a Proxy's trap could
   * answer `unsafeHandle` with any pointer, which C would take for a device.
   */
  static [deviceList](devices: unknown, what: string): Device[] {
    const n = Array.isArray(devices) ? listLength(devices, what) : 0;
    if (n === 0) throw new TypeError(`${what} must be a non-empty array of cl.Device, got ${show(devices)}`);
    const list: Device[] = new Array(n);
    for (let i = 0; i < list.length; i++) {
      const d = (devices as unknown[])[i];
      if (!Device[genuine](d)) throw new TypeError(`devices[${i}] is not a cl.Device, got ${show(d)}`);
      list[i] = d;
    }
    return list;
  }

  /**
   * @internal The cl_device_id from the private field of a genuine device: `unsafeHandle` is a
   * getter of the prototype, which a program can redefine (a cl_mem reached clCreateContext as a
   * device: SIGSEGV).
   */
  static [handleOf](device: Device): Pointer {
    return device.#handle;
  }

  /** @internal use `platform.getDevices()`. */
  constructor(made: typeof fromFactory, handle: Pointer, platform: Platform) {
    if (made !== fromFactory) notByNew("cl.Device", "platform.getDevices()");
    const s = opencl().symbols;
    const info = s.clGetDeviceInfo;
    this.#handle = handle;
    this.platform = platform;
    this.name = infoString("clGetDeviceInfo", info, handle, DeviceInfo.NAME);
    this.vendor = infoString("clGetDeviceInfo", info, handle, DeviceInfo.VENDOR);
    this.version = infoString("clGetDeviceInfo", info, handle, DeviceInfo.VERSION);
    this.driverVersion = infoString("clGetDeviceInfo", info, handle, DeviceInfo.DRIVER_VERSION);
    this.typeMask = infoU64("clGetDeviceInfo", info, handle, DeviceInfo.TYPE);
    this.type = this.typeMask & DeviceType.GPU
      ? "gpu"
      : this.typeMask & DeviceType.CPU
      ? "cpu"
      : this.typeMask & DeviceType.ACCELERATOR
      ? "accelerator"
      : this.typeMask & DeviceType.CUSTOM
      ? "custom"
      : "default";
    this.globalMemSize = infoU64("clGetDeviceInfo", info, handle, DeviceInfo.GLOBAL_MEM_SIZE);
    this.maxMemAllocSize = infoU64("clGetDeviceInfo", info, handle, DeviceInfo.MAX_MEM_ALLOC_SIZE);
    this.maxComputeUnits = infoU32("clGetDeviceInfo", info, handle, DeviceInfo.MAX_COMPUTE_UNITS);
    this.localMemSize = infoU64("clGetDeviceInfo", info, handle, DeviceInfo.LOCAL_MEM_SIZE);
    let caps = 0;
    try {
      caps = infoU64("clGetDeviceInfo", info, handle, DeviceInfo.SVM_CAPABILITIES);
    } catch {
      caps = 0; // OpenCL 1.x devices reject the query: no SVM
    }
    this.svm = Object.freeze({
      coarseGrainBuffer: (caps & SVMCapability.COARSE_GRAIN_BUFFER) !== 0,
      fineGrainBuffer: (caps & SVMCapability.FINE_GRAIN_BUFFER) !== 0,
      fineGrainSystem: (caps & SVMCapability.FINE_GRAIN_SYSTEM) !== 0,
      atomics: (caps & SVMCapability.ATOMICS) !== 0,
    });
    // memlife trusts these figures (`cl.local` against localMemSize: over it PoCL aborts): a
    // program must not be able to change them.
    Object.freeze(this);
  }

  /** The raw cl_device_id. Unsafe: bypasses every check. */
  get unsafeHandle(): Pointer {
    return this.#handle;
  }

  static {
    closeStatics(this);
  }
}

let platforms: Platform[] | undefined;

/**
 * Every OpenCL platform the ICD loader finds (none is an empty list, not an error).
 * @example
 * import { cl } from "memlife";
 * for (const p of cl.getPlatforms()) console.log(p.name, p.getDevices().map((d) => d.name));
 */
export function getPlatforms(): Platform[] {
  // The drivers' first initialization, platforms and their devices, under a lock of the whole
  // process: PoCL 3.1's is not thread-safe, and the files of `deno test --parallel` (or Workers)
  // reach it at once from threads of one process (ffi/process-lock.ts).
  if (platforms === undefined) {
    opencl(); // the library first, with its own errors, outside the lock
    platforms = backend.exclusive(findPlatforms);
  }
  return [...platforms];
}

function findPlatforms(): Platform[] {
  const s = opencl().symbols;
  const status = s.clGetPlatformIDs(0, null, countSlot);
  if (status === OpenCLStatus.CL_PLATFORM_NOT_FOUND_KHR) return []; // a loader with no driver installed
  check("clGetPlatformIDs", status);
  const list = new BigUint64Array(new ArrayBuffer(8 * Math.max(countSlot[0], 1)));
  check("clGetPlatformIDs", s.clGetPlatformIDs(countSlot[0], list, null));
  const found = handles(list.subarray(0, countSlot[0])).map((h) => new Platform(fromFactory, h));
  for (const platform of found) {
    try {
      platform.getDevices();
    } catch {
      // Not kept: the program's own getDevices() asks again and gets the error.
    }
  }
  return found;
}
