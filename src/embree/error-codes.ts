/** Embree's `enum RTCError` (embree3/rtcore_device.h, embree4/rtcore_device.h), by name. Data only. */
export const EmbreeErrorCode = Object.freeze(
  {
    RTC_ERROR_NONE: 0,
    RTC_ERROR_UNKNOWN: 1,
    RTC_ERROR_INVALID_ARGUMENT: 2,
    RTC_ERROR_INVALID_OPERATION: 3,
    RTC_ERROR_OUT_OF_MEMORY: 4,
    RTC_ERROR_UNSUPPORTED_CPU: 5,
    RTC_ERROR_CANCELLED: 6,
    /** Embree 4 only. */
    RTC_ERROR_LEVEL_ZERO_RAISED_ERROR: 7,
  } as const,
);

export type EmbreeErrorName = keyof typeof EmbreeErrorCode;
