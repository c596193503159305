/**
 * Every native function pointer memlife hands to a library, made here and nowhere else: one per
 * callback kind for the whole process, made on first use and never freed (a library may call it
 * until the process ends). Native code finds its entry through `user_data`, an integer id in an
 * IdTable of the module that owns the kind.
 *
 * Each kind has exactly one owner, which gives its handler once, at module load, and gets back
 * the accessor it calls wherever it registers a callback: a lazily made module-level pointer,
 * nothing more per call than before the first.
 */
import type { Callback, CallbackDef, MemoryLedger, NativeType, Pointer } from "../ffi/types.ts";
import { embreeCallbacks } from "../ffi/symbols/embree.ts";
import { openclCallbacks } from "../ffi/symbols/opencl.ts";
import { backend } from "./backend.ts";

/**
 * The JS value a callback argument arrives as (ffi/types.ts). A `usize` or `id` argument of a
 * callback is always a `user_data` id the core passed, an IdTable index (below 2^32): a number.
 */
type JsArg<T extends NativeType> = T extends "usize" | "id" ? number
  : T extends "i64" | "u64" | "isize" ? number | bigint
  : T extends "bool" ? boolean
  : T extends "ptr" | "buffer" | "cstring" | "fn" ? Pointer | null
  : number;
type JsArgs<A extends readonly NativeType[]> = { -readonly [I in keyof A]: JsArg<A[I]> };
/** The core answers with the exact type: it never relies on how a backend converts other values. */
type JsResult<R extends CallbackDef["returns"]> = R extends "void" ? void : R extends "bool" ? boolean : number;

/** The JS function behind one callback kind. */
export type Handler<D extends CallbackDef> = (...args: JsArgs<D["args"]>) => JsResult<D["returns"]>;

/** A kind's accessor maker: the owner calls it once with its handler. */
function kind<D extends CallbackDef>(def: D): (handler: Handler<D>) => () => Callback {
  return (handler) => {
    let made: Callback | undefined;
    return () => made ??= backend.callback(def, handler as (...args: never[]) => unknown);
  };
}

/** The memory monitor's kind, which the backend's ledger makes (natively on Bun). */
function ledger(
  def: typeof embreeCallbacks.memoryMonitor,
): (forward: (id: number, bytes: number, post: boolean) => boolean) => () => MemoryLedger {
  return (forward) => {
    let made: MemoryLedger | undefined;
    return () => made ??= backend.memoryLedger(def, forward);
  };
}

export const trampolines = {
  /** clSetMemObjectDestructorCallback's pfn_notify; owner: src/opencl/buffer.ts. */
  bufferDestructor: kind(openclCallbacks.memDestructor),
  /** clEnqueueSVMFree's pfn_free_func; owner: src/opencl/svm.ts. */
  svmFree: kind(openclCallbacks.svmFree),
  /** clSetEventCallback's pfn_notify for the completion a queue arms; owner: src/opencl/queue.ts. */
  queueCompletion: kind(openclCallbacks.eventStatus),
  /** clSetEventCallback's pfn_notify for `event.wait()`; owner: src/opencl/event.ts. */
  eventWait: kind(openclCallbacks.eventStatus),
  /** rtcSetDeviceErrorFunction's function; owner: src/embree/state.ts. */
  embreeError: kind(embreeCallbacks.error),
  /** rtcSetDeviceMemoryMonitorFunction's function, with its accounts; owner: src/embree/state.ts. */
  embreeMonitor: ledger(embreeCallbacks.memoryMonitor),
} as const;
