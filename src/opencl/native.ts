/**
 * The OpenCL library, loaded on first use, and the helpers every OpenCL object shares:
 * status checks, info queries, pointer arrays.
 */
import type { NativeLibrary, Pointer } from "../../ffi/types.ts";
import { openclSymbols } from "../../ffi/symbols/opencl.ts";
import { backend } from "../backend.ts";
import { OpenCLError } from "../errors.ts";
import { reportCallbackError } from "../callbacks.ts";
import { OpenCLStatus } from "./status-codes.ts";
import { openLibrary } from "../library.ts";
import { refuseInWorker } from "../worker.ts";

export type OpenCLSymbols = NativeLibrary<typeof openclSymbols>["symbols"];

let library: NativeLibrary<typeof openclSymbols> | undefined;

/**
 * The synchronous bindings, for hot paths, set when the library loads. Only objects made after
 * `opencl()` ran (every context, buffer, queue) may use it.
 */
export let symbols: OpenCLSymbols;
/** The same without Deno's protection of `reentrant` entries: only where no callback can run (see ffi/types.ts). */
export let unguarded: OpenCLSymbols;

/**
 * The loaded library; the first call opens it ($OPENCL_LIBRARY, then the usual names). Public as
 * `cl.library()`: raw bindings that bypass every check.
 * @example
 * import { cl } from "memlife";
 * console.log(cl.library().path); // "libOpenCL.so.1"
 */
export function opencl(): NativeLibrary<typeof openclSymbols> {
  if (library === undefined) {
    refuseInWorker("OpenCL");
    library = load();
    symbols = library.symbols;
    unguarded = library.unguarded;
  }
  return library;
}

function load(): NativeLibrary<typeof openclSymbols> {
  return openLibrary({
    name: "OpenCL",
    envVar: "OPENCL_LIBRARY",
    candidates: {
      linux: ["libOpenCL.so.1", "libOpenCL.so"],
      darwin: ["/System/Library/Frameworks/OpenCL.framework/OpenCL"],
      win32: ["OpenCL.dll"],
    },
    hint: "Install an ICD loader and a driver: Debian/Ubuntu `apt-get install ocl-icd-libopencl1 pocl-opencl-icd` " +
      "(PoCL runs on the CPU), Fedora `dnf install ocl-icd pocl`, or your GPU vendor's OpenCL driver.",
  }, openclSymbols);
}

/** An optional entry point, or an OpenCLError whose sentence says which OpenCL version it needs. */
export function optionalSymbol(name: keyof OpenCLSymbols, needs: string): (...args: unknown[]) => unknown {
  const fn = opencl().symbols[name];
  if (fn === undefined) {
    throw new OpenCLError(
      name,
      OpenCLStatus.CL_INVALID_OPERATION,
      `${name} needs ${needs}; the loaded OpenCL library (${opencl().path}) does not export it`,
    );
  }
  return fn;
}

/** One reusable out-slot for `cl_int *errcode_ret`, read right after each call. */
export const errcode = new Int32Array(new ArrayBuffer(4));

/**
 * The one place a status a native call returned becomes an error: OpenCLError unless CL_SUCCESS.
 * `detail` (a string, or a function only called on failure) adds what the call was about.
 */
export function check(fn: string, status: number, detail?: string | (() => string)): void {
  if (status !== OpenCLStatus.CL_SUCCESS) {
    throw new OpenCLError(fn, status, typeof detail === "function" ? detail() : detail);
  }
}

/**
 * The same for a native release that ran off the JS thread after `release()` returned: no caller
 * can receive its failure (a status, or the backend's own error), so it goes to `onCallbackError`
 * with source "release".
 */
export function releaseFailed(fn: string, failure: number | unknown): void {
  if (failure === OpenCLStatus.CL_SUCCESS) return;
  reportCallbackError(typeof failure === "number" ? new OpenCLError(fn, failure) : failure, "release");
}

const sizeRet = new BigUint64Array(new ArrayBuffer(8));
const scratch = new Uint8Array(new ArrayBuffer(8));
const scratch64 = new BigUint64Array(scratch.buffer);
const scratch32 = new Uint32Array(scratch.buffer);

type InfoFn = (
  handle: Pointer,
  param: number,
  size: number,
  value: ArrayBufferView | null,
  sizeRet: ArrayBufferView | null,
) => number;

/** Raw bytes of a clGet*Info value. */
export function infoBytes(fnName: string, fn: InfoFn, handle: Pointer, param: number): Uint8Array {
  check(fnName, fn(handle, param, 0, null, sizeRet));
  const out = new Uint8Array(new ArrayBuffer(Number(sizeRet[0])));
  if (out.length > 0) check(fnName, fn(handle, param, out.length, out, null));
  return out;
}

const decoder = new TextDecoder();
export function infoString(fnName: string, fn: InfoFn, handle: Pointer, param: number): string {
  const bytes = infoBytes(fnName, fn, handle, param);
  const end = bytes.indexOf(0);
  return decoder.decode(end < 0 ? bytes : bytes.subarray(0, end));
}

export function infoU32(fnName: string, fn: InfoFn, handle: Pointer, param: number): number {
  check(fnName, fn(handle, param, 4, scratch, null));
  return scratch32[0];
}

/** cl_ulong / size_t / bitfield values, as a number (exact below 2^53, which covers memory sizes). */
export function infoU64(fnName: string, fn: InfoFn, handle: Pointer, param: number, size = 8): number {
  scratch64[0] = 0n;
  check(fnName, fn(handle, param, size, scratch, null));
  return Number(scratch64[0]);
}

export function infoPointer(fnName: string, fn: InfoFn, handle: Pointer, param: number): Pointer | null {
  scratch64[0] = 0n;
  check(fnName, fn(handle, param, 8, scratch, null));
  return backend.fromAddress(scratch64[0]);
}

/** A C array of handles (cl_event[], void*[]) with its own ArrayBuffer. */
export function pointerArray(pointers: readonly (Pointer | null)[]): BigUint64Array {
  const out = new BigUint64Array(new ArrayBuffer(8 * Math.max(pointers.length, 1)));
  for (let i = 0; i < pointers.length; i++) out[i] = backend.address(pointers[i]);
  return out;
}

/**
 * The `cl_event *` out-parameter of every enqueue call. One for the process: each call writes it
 * and the caller reads it right after, before any other JS runs (the trampolines never enqueue).
 */
export const eventOut = new BigUint64Array(new ArrayBuffer(8));

let pointerScratch = new BigUint64Array(new ArrayBuffer(8 * 16));
/**
 * A reusable C array of at least `length` pointers for a synchronous call that reads it only while
 * it runs (OpenCL: "the memory associated with svm_pointers can be reused after the function
 * returns"). Never for an async call, which reads it later.
 */
export function scratchPointers(length: number): BigUint64Array {
  if (length > pointerScratch.length) pointerScratch = new BigUint64Array(new ArrayBuffer(8 * length));
  return pointerScratch;
}
