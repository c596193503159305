/** One error class per native library, plus those that describe misuse, missing libraries and Workers. */

/** OpenCL status codes of cl.h 3.0 (and the ICD loader's -1001), by value. */
const openclCodeNames: Record<number, string> = {
  0: "CL_SUCCESS", [-1]: "CL_DEVICE_NOT_FOUND", [-2]: "CL_DEVICE_NOT_AVAILABLE",
  [-3]: "CL_COMPILER_NOT_AVAILABLE", [-4]: "CL_MEM_OBJECT_ALLOCATION_FAILURE",
  [-5]: "CL_OUT_OF_RESOURCES", [-6]: "CL_OUT_OF_HOST_MEMORY", [-7]: "CL_PROFILING_INFO_NOT_AVAILABLE",
  [-8]: "CL_MEM_COPY_OVERLAP", [-9]: "CL_IMAGE_FORMAT_MISMATCH", [-10]: "CL_IMAGE_FORMAT_NOT_SUPPORTED",
  [-11]: "CL_BUILD_PROGRAM_FAILURE", [-12]: "CL_MAP_FAILURE", [-13]: "CL_MISALIGNED_SUB_BUFFER_OFFSET",
  [-14]: "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST", [-15]: "CL_COMPILE_PROGRAM_FAILURE",
  [-16]: "CL_LINKER_NOT_AVAILABLE", [-17]: "CL_LINK_PROGRAM_FAILURE", [-18]: "CL_DEVICE_PARTITION_FAILED",
  [-19]: "CL_KERNEL_ARG_INFO_NOT_AVAILABLE", [-30]: "CL_INVALID_VALUE", [-31]: "CL_INVALID_DEVICE_TYPE",
  [-32]: "CL_INVALID_PLATFORM", [-33]: "CL_INVALID_DEVICE", [-34]: "CL_INVALID_CONTEXT",
  [-35]: "CL_INVALID_QUEUE_PROPERTIES", [-36]: "CL_INVALID_COMMAND_QUEUE", [-37]: "CL_INVALID_HOST_PTR",
  [-38]: "CL_INVALID_MEM_OBJECT", [-39]: "CL_INVALID_IMAGE_FORMAT_DESCRIPTOR", [-40]: "CL_INVALID_IMAGE_SIZE",
  [-41]: "CL_INVALID_SAMPLER", [-42]: "CL_INVALID_BINARY", [-43]: "CL_INVALID_BUILD_OPTIONS",
  [-44]: "CL_INVALID_PROGRAM", [-45]: "CL_INVALID_PROGRAM_EXECUTABLE", [-46]: "CL_INVALID_KERNEL_NAME",
  [-47]: "CL_INVALID_KERNEL_DEFINITION", [-48]: "CL_INVALID_KERNEL", [-49]: "CL_INVALID_ARG_INDEX",
  [-50]: "CL_INVALID_ARG_VALUE", [-51]: "CL_INVALID_ARG_SIZE", [-52]: "CL_INVALID_KERNEL_ARGS",
  [-53]: "CL_INVALID_WORK_DIMENSION", [-54]: "CL_INVALID_WORK_GROUP_SIZE", [-55]: "CL_INVALID_WORK_ITEM_SIZE",
  [-56]: "CL_INVALID_GLOBAL_OFFSET", [-57]: "CL_INVALID_EVENT_WAIT_LIST", [-58]: "CL_INVALID_EVENT",
  [-59]: "CL_INVALID_OPERATION", [-60]: "CL_INVALID_GL_OBJECT", [-61]: "CL_INVALID_BUFFER_SIZE",
  [-62]: "CL_INVALID_MIP_LEVEL", [-63]: "CL_INVALID_GLOBAL_WORK_SIZE", [-64]: "CL_INVALID_PROPERTY",
  [-65]: "CL_INVALID_IMAGE_DESCRIPTOR", [-66]: "CL_INVALID_COMPILER_OPTIONS", [-67]: "CL_INVALID_LINKER_OPTIONS",
  [-68]: "CL_INVALID_DEVICE_PARTITION_COUNT", [-69]: "CL_INVALID_PIPE_SIZE", [-70]: "CL_INVALID_DEVICE_QUEUE",
  [-71]: "CL_INVALID_SPEC_ID", [-72]: "CL_MAX_SIZE_RESTRICTION_EXCEEDED", [-1001]: "CL_PLATFORM_NOT_FOUND_KHR",
};

/** The name cl.h gives a status code, e.g. `CL_INVALID_VALUE` for -30. */
export function openclCodeName(code: number): string {
  return openclCodeNames[code] ?? `CL_UNKNOWN_ERROR_${code}`;
}

/**
 * A native OpenCL call failed.
 * @example
 * try { ctx.createBuffer(0) } catch (e) { if (e instanceof OpenCLError) console.log(e.fn, e.codeName) }
 */
export class OpenCLError extends Error {
  /** The cl_int status, e.g. -30. */
  readonly code: number;
  /** Its cl.h name, e.g. "CL_INVALID_VALUE". */
  readonly codeName: string;
  /** The OpenCL function that returned it, e.g. "clCreateBuffer". */
  readonly fn: string;
  constructor(fn: string, code: number, detail?: string) {
    const codeName = openclCodeName(code);
    super(`${fn} failed: ${codeName} (${code})${detail ? `: ${detail}` : ""}`);
    this.name = "OpenCLError";
    this.code = code;
    this.codeName = codeName;
    this.fn = fn;
  }
}

/** Embree's RTCError values (0–6 in Embree 3 and 4; 7 in Embree 4 only). */
export const embreeCodeNames: readonly string[] = [
  "RTC_ERROR_NONE", "RTC_ERROR_UNKNOWN", "RTC_ERROR_INVALID_ARGUMENT", "RTC_ERROR_INVALID_OPERATION",
  "RTC_ERROR_OUT_OF_MEMORY", "RTC_ERROR_UNSUPPORTED_CPU", "RTC_ERROR_CANCELLED",
  "RTC_ERROR_LEVEL_ZERO_RAISED_ERROR",
];

/** The name embree.h gives an RTCError, e.g. `RTC_ERROR_OUT_OF_MEMORY` for 4. */
export function embreeCodeName(code: number): string {
  return embreeCodeNames[code] ?? `RTC_ERROR_UNKNOWN_CODE_${code}`;
}

/**
 * A native Embree call failed (reported through the device's error function).
 * @example
 * try { await scene.commit() } catch (e) { if (e instanceof EmbreeError && e.codeName === "RTC_ERROR_OUT_OF_MEMORY") shrink() }
 */
export class EmbreeError extends Error {
  readonly code: number;
  readonly codeName: string;
  readonly fn: string;
  /** Embree's own description of the failure. */
  readonly embreeMessage: string;
  constructor(fn: string, code: number, message: string, options?: { cause?: unknown }) {
    const codeName = embreeCodeName(code);
    super(`${fn} failed: ${codeName} (${code})${message ? `: ${message}` : ""}`, options);
    this.name = "EmbreeError";
    this.code = code;
    this.codeName = codeName;
    this.fn = fn;
    this.embreeMessage = message;
  }
}

/**
 * A native library could not be loaded. `tried` lists every path attempted, in order.
 * @example
 * // LibraryLoadError: could not load OpenCL. Tried: $OPENCL_LIBRARY (unset), libOpenCL.so.1, libOpenCL.so.
 * // Install it: Debian/Ubuntu `apt-get install ocl-icd-libopencl1 pocl-opencl-icd` ...
 */
export class LibraryLoadError extends Error {
  readonly library: string;
  readonly tried: readonly string[];
  constructor(library: string, tried: readonly string[], hint: string, options?: { cause?: unknown }) {
    super(`could not load ${library}. Tried: ${tried.join(", ")}. ${hint}`, options);
    this.name = "LibraryLoadError";
    this.library = library;
    this.tried = tried;
  }
}

/** A memlife object was used after `release()` (or after its native side was freed). */
export class ReleasedError extends Error {
  constructor(what: string) {
    super(`${what} has been released`);
    this.name = "ReleasedError";
  }
}

/**
 * What was asked cannot be done safely in a Worker on this runtime: native threads would call
 * into the Worker after it may have been terminated, which crashes or hangs the whole process
 * (see README, "Workers"). Use it on the main thread.
 * @example
 * try { cl.createContext() } catch (e) { if (e instanceof WorkerError) postMessage("use the main thread") }
 */
export class WorkerError extends Error {
  /** What was refused, e.g. "OpenCL" or "setMemoryMonitorFunction". */
  readonly feature: string;
  readonly runtime: string;
  constructor(feature: string, runtime: string, why: string) {
    super(`${feature} is not available in a Worker on ${runtime}: ${why}. Use it on the main thread.`);
    this.name = "WorkerError";
    this.feature = feature;
    this.runtime = runtime;
  }
}
