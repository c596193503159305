/** cl.h constants memlife uses, `as const` so that the public API can name them. */

export const DeviceType = {
  DEFAULT: 1,
  CPU: 2,
  GPU: 4,
  ACCELERATOR: 8,
  CUSTOM: 16,
  ALL: 0xffffffff,
} as const;
export type DeviceType = typeof DeviceType[keyof typeof DeviceType];

export const MemFlags = {
  READ_WRITE: 1,
  WRITE_ONLY: 2,
  READ_ONLY: 4,
  USE_HOST_PTR: 8,
  ALLOC_HOST_PTR: 16,
  COPY_HOST_PTR: 32,
  SVM_FINE_GRAIN_BUFFER: 1 << 10,
  SVM_ATOMICS: 1 << 11,
} as const;

/** `event.commandType` values (cl_command_type). */
export const CommandType = {
  NDRANGE_KERNEL: 0x11f0,
  TASK: 0x11f1,
  NATIVE_KERNEL: 0x11f2,
  READ_BUFFER: 0x11f3,
  WRITE_BUFFER: 0x11f4,
  COPY_BUFFER: 0x11f5,
  MARKER: 0x11fe,
  USER: 0x1204,
  BARRIER: 0x1205,
  FILL_BUFFER: 0x1207,
  SVM_FREE: 0x1209,
  SVM_MEMCPY: 0x120a,
  SVM_MEMFILL: 0x120b,
  SVM_MAP: 0x120c,
  SVM_UNMAP: 0x120d,
} as const;
export type CommandType = typeof CommandType[keyof typeof CommandType];

/** `event.status` values (cl_int execution status; negative values are errors). */
export const ExecutionStatus = {
  COMPLETE: 0,
  RUNNING: 1,
  SUBMITTED: 2,
  QUEUED: 3,
} as const;

export const PlatformInfo = {
  PROFILE: 0x0900,
  VERSION: 0x0901,
  NAME: 0x0902,
  VENDOR: 0x0903,
  EXTENSIONS: 0x0904,
} as const;

export const DeviceInfo = {
  TYPE: 0x1000,
  MAX_COMPUTE_UNITS: 0x1002,
  MAX_MEM_ALLOC_SIZE: 0x1010,
  MEM_BASE_ADDR_ALIGN: 0x1019,
  GLOBAL_MEM_SIZE: 0x101f,
  LOCAL_MEM_SIZE: 0x1023,
  NAME: 0x102b,
  VENDOR: 0x102c,
  DRIVER_VERSION: 0x102d,
  VERSION: 0x102f,
  SVM_CAPABILITIES: 0x1053,
} as const;

export const SVMCapability = {
  COARSE_GRAIN_BUFFER: 1,
  FINE_GRAIN_BUFFER: 2,
  FINE_GRAIN_SYSTEM: 4,
  ATOMICS: 8,
} as const;

export const MemInfo = {
  TYPE: 0x1100,
  FLAGS: 0x1101,
  SIZE: 0x1102,
  HOST_PTR: 0x1103,
  MAP_COUNT: 0x1104,
  REFERENCE_COUNT: 0x1105,
  CONTEXT: 0x1106,
} as const;
export const ContextInfo = { REFERENCE_COUNT: 0x1080, DEVICES: 0x1081, NUM_DEVICES: 0x1083 } as const;
export const QueueInfo = { CONTEXT: 0x1090, DEVICE: 0x1091, REFERENCE_COUNT: 0x1092 } as const;
export const EventInfo = {
  COMMAND_QUEUE: 0x11d0,
  COMMAND_TYPE: 0x11d1,
  REFERENCE_COUNT: 0x11d2,
  COMMAND_EXECUTION_STATUS: 0x11d3,
  CONTEXT: 0x11d4,
} as const;

export const ProgramInfo = {
  NUM_DEVICES: 0x1162,
  DEVICES: 0x1163,
  SOURCE: 0x1164,
  NUM_KERNELS: 0x1167,
  KERNEL_NAMES: 0x1168,
} as const;
export const ProgramBuildInfo = { STATUS: 0x1181, OPTIONS: 0x1182, LOG: 0x1183 } as const;
export const KernelInfo = { FUNCTION_NAME: 0x1190, NUM_ARGS: 0x1191, ATTRIBUTES: 0x1195 } as const;
export const KernelArgInfo = {
  ADDRESS_QUALIFIER: 0x1196,
  ACCESS_QUALIFIER: 0x1197,
  TYPE_NAME: 0x1198,
  TYPE_QUALIFIER: 0x1199,
  NAME: 0x119a,
} as const;
export const KernelArgAddress = { GLOBAL: 0x119b, LOCAL: 0x119c, CONSTANT: 0x119d, PRIVATE: 0x119e } as const;
export const KernelWorkGroupInfo = {
  WORK_GROUP_SIZE: 0x11b0,
  COMPILE_WORK_GROUP_SIZE: 0x11b1,
  LOCAL_MEM_SIZE: 0x11b2,
  PREFERRED_WORK_GROUP_SIZE_MULTIPLE: 0x11b3,
  PRIVATE_MEM_SIZE: 0x11b4,
} as const;
export const KernelExecInfo = { SVM_PTRS: 0x11b6 } as const;
export const MapFlags = { READ: 1, WRITE: 2, WRITE_INVALIDATE_REGION: 4 } as const;
