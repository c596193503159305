/**
 * memlife: OpenCL and Embree memory-lifecycle callbacks for Bun, Deno and Node.
 * The one public entry: it picks the runtime's FFI backend; each native library loads on first use.
 * @example
 * import { cl } from "memlife";
 * using ctx = cl.createContext();
 * const buf = ctx.createBuffer(4096);
 * buf.setDestructorCallback(() => console.log("gone"));
 * buf.release();
 */
export * as cl from "./opencl/mod.ts";
export * as rtc from "./embree/mod.ts";
export { EmbreeError, LibraryLoadError, OpenCLError, ReleasedError, WorkerError } from "./errors.ts";
export { type CallbackErrorHandler, type CallbackSource, onCallbackError } from "./callbacks.ts";
export { runtime } from "./backend.ts";
