/**
 * Embree 3 and 4 entry points memlife binds, as data. Both majors share these signatures unless an
 * entry says otherwise; `optional` entries exist in Embree 4 only. `reentrant`: the call may run
 * the memory monitor (it allocates or frees) or the error function (it can fail) on the calling
 * thread, i.e. JS inside the call (see ffi/types.ts). rtcIntersect1 on a committed scene does
 * neither and keeps the fast path.
 */
import type { CallbackTable, SymbolTable } from "../types.ts";

export const embreeSymbols = {
  rtcNewDevice: { args: ["cstring"], returns: "ptr" }, // RTCDevice rtcNewDevice(const char *config)
  rtcRetainDevice: { args: ["ptr"], returns: "void" }, // void rtcRetainDevice(RTCDevice)
  rtcReleaseDevice: { args: ["ptr"], returns: "void", blocking: true, reentrant: true }, // void rtcReleaseDevice(RTCDevice): the last reference shuts the device's TBB arena down
  rtcGetDeviceProperty: { args: ["ptr", "i32"], returns: "isize" }, // ssize_t rtcGetDeviceProperty(RTCDevice, enum RTCDeviceProperty)
  rtcGetDeviceError: { args: ["ptr"], returns: "i32" }, // RTCError rtcGetDeviceError(RTCDevice)
  rtcSetDeviceErrorFunction: { args: ["ptr", "fn", "usize"], returns: "void" }, // void (RTCDevice, RTCErrorFunction, void *userPtr)
  rtcSetDeviceMemoryMonitorFunction: { args: ["ptr", "fn", "usize"], returns: "void" }, // void (RTCDevice, RTCMemoryMonitorFunction, void *userPtr)
  rtcNewScene: { args: ["ptr"], returns: "ptr", reentrant: true }, // RTCScene rtcNewScene(RTCDevice)
  rtcRetainScene: { args: ["ptr"], returns: "void" }, // void rtcRetainScene(RTCScene)
  rtcReleaseScene: { args: ["ptr"], returns: "void", blocking: true, reentrant: true }, // void rtcReleaseScene(RTCScene): frees build data, calling the monitor
  // void rtcCommitScene(RTCScene): builds on TBB workers, which call the monitor. On one thread
  // when it can: a commit of 10k triangles took a third longer on average from a thread other than
  // the previous commit's (ffi/lane.c).
  rtcCommitScene: { args: ["ptr"], returns: "void", blocking: true, reentrant: true, sameThread: true },
  rtcNewGeometry: { args: ["ptr", "i32"], returns: "ptr", reentrant: true }, // RTCGeometry rtcNewGeometry(RTCDevice, enum RTCGeometryType)
  rtcReleaseGeometry: { args: ["ptr"], returns: "void", reentrant: true }, // void rtcReleaseGeometry(RTCGeometry)
  rtcSetNewGeometryBuffer: {
    args: ["ptr", "i32", "u32", "i32", "usize", "usize"], // RTCGeometry, enum RTCBufferType, unsigned slot, enum RTCFormat, size_t byteStride, size_t itemCount
    returns: "ptr", // void *: Embree-owned memory (allocation reported to the monitor)
    reentrant: true,
  },
  rtcCommitGeometry: { args: ["ptr"], returns: "void", reentrant: true }, // void rtcCommitGeometry(RTCGeometry)
  rtcAttachGeometry: { args: ["ptr", "ptr"], returns: "u32", reentrant: true }, // unsigned rtcAttachGeometry(RTCScene, RTCGeometry)
  // Embree 3: void rtcIntersect1(RTCScene, struct RTCIntersectContext *, struct RTCRayHit *)
  // Embree 4: void rtcIntersect1(RTCScene, struct RTCRayHit *, struct RTCIntersectArguments *)
  rtcIntersect1: { args: ["ptr", "buffer", "buffer"], returns: "void" },
  rtcGetErrorString: { args: ["i32"], returns: "ptr", optional: true }, // const char *rtcGetErrorString(RTCError): Embree 4
  rtcGetDeviceLastErrorMessage: { args: ["ptr"], returns: "ptr", optional: true }, // const char *(RTCDevice): Embree 4
} as const satisfies SymbolTable;

/** Native callback signatures; src/trampolines.ts makes one trampoline per entry for the whole process. */
export const embreeCallbacks = {
  // bool (*RTCMemoryMonitorFunction)(void *userPtr, ssize_t bytes, bool post): called from TBB workers, answer needed at once
  memoryMonitor: { args: ["usize", "isize", "bool"], returns: "bool", delivery: "sync" },
  // void (*RTCErrorFunction)(void *userPtr, enum RTCError code, const char *str): str valid only during the call;
  // called on the thread of the API call that failed (off the JS thread: a commit's or a release's lane)
  error: { args: ["usize", "i32", "ptr"], returns: "void", delivery: "sync", onAsyncThreads: true },
} as const satisfies CallbackTable;

/**
 * What `MemoryLedger.apply` answers (ffi/types.ts), and `settle()` in ffi/bun-relay.c returns:
 * the allocation may go on, the budget refused it, or the monitor did.
 */
export const LedgerVerdict = Object.freeze({ allowed: 0, budgetRefused: 1, monitorRefused: 2 } as const);
