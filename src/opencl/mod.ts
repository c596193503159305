/** The OpenCL half of memlife, imported as `cl` from `src/mod.ts`. */
export { getPlatforms, Platform, Device, type SVMCapabilities } from "./platform.ts";
export { Context, createContext, defaultDevice } from "./context.ts";
export { Buffer, type BufferOptions, type DestructorCallback, type HostPtrMode, type Access } from "./buffer.ts";
export {
  CommandQueue,
  type CopyBufferOptions,
  type MapAccess,
  type NDRangeOptions,
  type RangeOptions,
  type SVMCopyOptions,
  type SVMFreeOptions,
  SVMMapping,
  type SVMMapOptions,
  type TransferOptions,
} from "./queue.ts";
export { type BuildLogEntry, Program } from "./program.ts";
export {
  Kernel, type KernelArg, local, LocalMemory, type ScalarType, TypedValue,
  char, char2, char3, char4, char8, char16, uchar, uchar2, uchar3, uchar4, uchar8, uchar16,
  short, short2, short3, short4, short8, short16, ushort, ushort2, ushort3, ushort4, ushort8, ushort16,
  int, int2, int3, int4, int8, int16, uint, uint2, uint3, uint4, uint8, uint16,
  long, long2, long3, long4, long8, long16, ulong, ulong2, ulong3, ulong4, ulong8, ulong16,
  float, float2, float3, float4, float8, float16, double, double2, double3, double4, double8, double16,
} from "./kernel.ts";
export { Event, UserEvent } from "./event.ts";
export { SVMAllocation, type SVMFreeCallback, type SVMOptions } from "./svm.ts";
export { CommandType, DeviceType, ExecutionStatus, MemFlags } from "./constants.ts";
export { opencl as library } from "./native.ts";
