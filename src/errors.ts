/** One error class per native library, plus those that describe misuse, missing libraries and Workers. */
import { openclStatusNames } from "./opencl/status-codes.ts";
import { EmbreeErrorCode, type EmbreeErrorName } from "./embree/error-codes.ts";

/**
 * The name the Khronos headers give a status code, e.g. `CL_INVALID_VALUE` for -30 or
 * `CL_INVALID_GL_SHAREGROUP_REFERENCE_KHR` for -1000; a code no header defines (a vendor's own)
 * reads `CL_UNKNOWN_ERROR_-9999`.
 */
export function openclCodeName(code: number): string {
  return Object.hasOwn(openclStatusNames, code) ? openclStatusNames[code] : `CL_UNKNOWN_ERROR_${code}`;
}

/**
 * A native OpenCL call failed.
 * @example
 * import { OpenCLError } from "memlife";
 * try { ctx.createBuffer(2 ** 40) } catch (e) { if (e instanceof OpenCLError) console.log(e.fn, e.codeName) } // clCreateBuffer CL_INVALID_BUFFER_SIZE
 */
export class OpenCLError extends Error {
  /** The cl_int status, e.g. -30. */
  readonly code: number;
  /** Its cl.h name, e.g. "CL_INVALID_VALUE". */
  readonly codeName: string;
  /** The OpenCL function that returned it, e.g. "clCreateBuffer". */
  readonly fn: string;
  /** A failed `program.build()`: each device's build log (the message quotes them too). */
  buildLog?: readonly { readonly device: { readonly name: string }; readonly log: string }[];
  constructor(fn: string, code: number, detail?: string) {
    const codeName = openclCodeName(code);
    super(`${fn} failed: ${codeName} (${code})${detail ? `: ${detail}` : ""}`);
    this.name = "OpenCLError";
    this.code = code;
    this.codeName = codeName;
    this.fn = fn;
  }
}

/** Embree's RTCError names by value (0–6 in Embree 3 and 4; 7 in Embree 4 only). */
export const embreeCodeNames: readonly EmbreeErrorName[] = Object.freeze(
  (Object.keys(EmbreeErrorCode) as EmbreeErrorName[]).sort((a, b) => EmbreeErrorCode[a] - EmbreeErrorCode[b]),
);

/** The name embree.h gives an RTCError, e.g. `RTC_ERROR_OUT_OF_MEMORY` for 4. */
export function embreeCodeName(code: number): string {
  return embreeCodeNames[code] ?? `RTC_ERROR_UNKNOWN_CODE_${code}`;
}

/**
 * A native Embree call failed (reported through the device's error function).
 * @example
 * import { EmbreeError } from "memlife";
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
 * import { cl, LibraryLoadError } from "memlife";
 * try { cl.getPlatforms() } catch (e) { if (e instanceof LibraryLoadError) console.error(e.message, e.tried) }
 * // LibraryLoadError: could not load OpenCL. Tried: libOpenCL.so.1, libOpenCL.so. ($OPENCL_LIBRARY unset) Install ...
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

/**
 * A memlife object was used after `release()` (or after its native side was freed).
 * @example
 * import { ReleasedError } from "memlife";
 * buf.release();
 * try { buf.retain() } catch (e) { console.log(e instanceof ReleasedError) } // true
 */
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
    super(
      `${feature} is not available in a Worker on ${runtime}: ${why}. Use it on the main thread, or set MEMLIFE_ALLOW_WORKERS=1 if this Worker is never terminated while callbacks are owed.`,
    );
    this.name = "WorkerError";
    this.feature = feature;
    this.runtime = runtime;
  }
}
