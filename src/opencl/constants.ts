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
} as const;
export type CommandType = typeof CommandType[keyof typeof CommandType];

/** `event.status` values (cl_int execution status; negative values are errors). */
export const ExecutionStatus = {
  COMPLETE: 0,
  RUNNING: 1,
  SUBMITTED: 2,
  QUEUED: 3,
} as const;

export const PlatformInfo = { PROFILE: 0x0900, VERSION: 0x0901, NAME: 0x0902, VENDOR: 0x0903, EXTENSIONS: 0x0904 } as const;

export const DeviceInfo = {
  TYPE: 0x1000,
  MAX_COMPUTE_UNITS: 0x1002,
  MAX_MEM_ALLOC_SIZE: 0x1010,
  MEM_BASE_ADDR_ALIGN: 0x1019,
  GLOBAL_MEM_SIZE: 0x101f,
  NAME: 0x102b,
  VENDOR: 0x102c,
  DRIVER_VERSION: 0x102d,
  VERSION: 0x102f,
  SVM_CAPABILITIES: 0x1053,
} as const;

export const SVMCapability = { COARSE_GRAIN_BUFFER: 1, FINE_GRAIN_BUFFER: 2, FINE_GRAIN_SYSTEM: 4, ATOMICS: 8 } as const;

export const MemInfo = { TYPE: 0x1100, FLAGS: 0x1101, SIZE: 0x1102, HOST_PTR: 0x1103, MAP_COUNT: 0x1104, REFERENCE_COUNT: 0x1105, CONTEXT: 0x1106 } as const;
export const ContextInfo = { REFERENCE_COUNT: 0x1080, DEVICES: 0x1081, NUM_DEVICES: 0x1083 } as const;
export const QueueInfo = { CONTEXT: 0x1090, DEVICE: 0x1091, REFERENCE_COUNT: 0x1092 } as const;
export const EventInfo = { COMMAND_QUEUE: 0x11d0, COMMAND_TYPE: 0x11d1, REFERENCE_COUNT: 0x11d2, COMMAND_EXECUTION_STATUS: 0x11d3, CONTEXT: 0x11d4 } as const;
