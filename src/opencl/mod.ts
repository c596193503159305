/** The OpenCL half of memlife, imported as `cl` from `src/mod.ts`. */
export { getPlatforms, Platform, Device, type SVMCapabilities } from "./platform.ts";
export { Context, createContext, defaultDevice } from "./context.ts";
export { Buffer, type BufferOptions, type DestructorCallback, type HostPtrMode, type Access } from "./buffer.ts";
export { CommandQueue, type SVMFreeOptions, type TransferOptions } from "./queue.ts";
export { Event, UserEvent } from "./event.ts";
export { SVMAllocation, type SVMFreeCallback, type SVMOptions } from "./svm.ts";
export { CommandType, DeviceType, ExecutionStatus, MemFlags } from "./constants.ts";
export { opencl as library } from "./native.ts";
