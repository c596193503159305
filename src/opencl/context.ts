/** Contexts: the parent of buffers, queues, events and SVM allocations. */
import type { Pointer } from "../../ffi/types.ts";
import { backend, envVar } from "../backend.ts";
import { finalizerState, SafetyNet } from "../callbacks.ts";
import { OpenCLError, ReleasedError } from "../errors.ts";
import { ContextInfo, MemFlags } from "./constants.ts";
import { check, errcode, infoU64, opencl, pointerArray, releaseFailed, symbols } from "./native.ts";
import { OpenCLStatus } from "./status-codes.ts";
import { Buffer, bufferArguments, type BufferOptions } from "./buffer.ts";
import { UserEvent } from "./event.ts";
import { Device, getPlatforms } from "./platform.ts";
import { readOnly, show } from "../check.ts";
import { CommandQueue } from "./queue.ts";
import { allocateSVM, type SVMAllocation, type SVMOptions } from "./svm.ts";
import { Program } from "./program.ts";
import { register } from "./classes.ts";
import {
  adoptChild,
  closeStatics,
  deviceList,
  disownChild,
  fromFactory,
  guardHold,
  handleOf,
  nativeHandle,
  svmChecked,
  svmPassed,
} from "../internal.ts";

const net = new SafetyNet<{ handle: Pointer; refs: number }, Context>(({ handle, refs }) => {
  for (let i = 0; i < refs; i++) releaseContext(handle);
}, (context) => Context[finalizerState](context));

/**
 * @internal The native release, off the JS thread (on some drivers it waits for destructor
 * callbacks that wait for the JS thread). No caller can receive its failure: it goes to
 * `onCallbackError` (source "release"). Exported for the tests only, not by mod.ts.
 */
export function releaseContext(handle: Pointer | null): void {
  opencl().async.clReleaseContext(handle).then(
    (status) => releaseFailed("clReleaseContext", status as number),
    (error) => releaseFailed("clReleaseContext", error),
  );
}

function pick<T extends { name: string }>(items: T[], selector: string, what: string): T {
  const index = /^\d+$/.test(selector)
    ? Number(selector)
    : items.findIndex((i) => i.name.toLowerCase().includes(selector.toLowerCase()));
  const found = items[index];
  if (found === undefined) {
    throw new RangeError(
      `no OpenCL ${what} matches "${selector}"; there are: ${
        items.map((i, n) => `${n}: ${i.name}`).join(", ") || "none"
      }`,
    );
  }
  return found;
}

/**
 * The device `createContext()` uses when given none: `MEMLIFE_OPENCL_PLATFORM` and
 * `MEMLIFE_OPENCL_DEVICE` (an index or a case-insensitive name substring) when set, else the
 * first device of the first platform that has one.
 * @example
 * import { cl } from "memlife";
 * // MEMLIFE_OPENCL_PLATFORM=nvidia node main.js
 * console.log(cl.defaultDevice().name);
 */
export function defaultDevice(): Device {
  const platforms = getPlatforms();
  if (platforms.length === 0) {
    // The ICD loader is there but found no driver: clGetPlatformIDs reported none.
    throw new OpenCLError(
      "clGetPlatformIDs",
      OpenCLStatus.CL_PLATFORM_NOT_FOUND_KHR,
      "no OpenCL platform: the ICD loader found no driver in /etc/OpenCL/vendors (or in $OCL_ICD_VENDORS, or " +
        "$OCL_ICD_FILENAMES when set). Install one: Debian/Ubuntu `apt-get install pocl-opencl-icd` (PoCL, the CPU), " +
        "`intel-opencl-icd`, `mesa-opencl-icd`, or your GPU vendor's driver (NVIDIA's ships its own ICD file)",
    );
  }
  const platformSelector = envVar("MEMLIFE_OPENCL_PLATFORM");
  const deviceSelector = envVar("MEMLIFE_OPENCL_DEVICE");
  const candidates = platformSelector !== undefined ? [pick(platforms, platformSelector, "platform")] : platforms;
  const devices = candidates.flatMap((p) => p.getDevices());
  if (devices.length === 0) {
    throw new OpenCLError(
      "clGetDeviceIDs",
      OpenCLStatus.CL_DEVICE_NOT_FOUND,
      `no OpenCL device found on ${platforms.length} platform(s); install a driver such as pocl-opencl-icd` +
        (candidates.some((p) => p.name === "Portable Computing Language") ? poclCacheHint() : ""),
    );
  }
  return deviceSelector !== undefined ? pick(devices, deviceSelector, "device") : devices[0];
}

/**
 * PoCL reports no device, and says why on stderr only with POCL_DEBUG, when it cannot create its
 * kernel cache: a program run by a user whose HOME is not writable (nobody's is /nonexistent), as
 * services often are. (Set to "", POCL_CACHE_DIR or XDG_CACHE_HOME makes PoCL 3.1 abort instead.)
 */
function poclCacheHint(): string {
  const where = ["POCL_CACHE_DIR", "XDG_CACHE_HOME", "HOME"].map((name) => `${name}=${readable(name)}`);
  return `. PoCL (installed here) reports no device when it cannot create its kernel cache ` +
    `($POCL_CACHE_DIR, else $XDG_CACHE_HOME/pocl, else $HOME/.cache/pocl; ${where.join(", ")}): ` +
    `set POCL_CACHE_DIR to a folder this user can write`;
}

/** A variable's value for a message: Deno's `--allow-env` may be limited to memlife's own variables. */
function readable(name: string): string {
  try {
    return envVar(name) ?? "(unset)";
  } catch {
    return "(not readable: --allow-env)";
  }
}

/**
 * An OpenCL context. Its native release waits until everything made from it is released, and
 * runs off the JS thread.
 * @example
 * import { cl } from "memlife";
 * using ctx = cl.createContext();
 * const buf = ctx.createBuffer(4096);
 */
/** A size in bytes createBuffer takes as it is (small enough for V8 to inline without counting it). */
function isByteCount(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 1;
}

export class Context {
  #handle: Pointer | null;
  #refs = 1;
  #released = false;
  /** Buffers, queues, events and SVM allocations not yet released. */
  #children = 0;
  /** Of `#children`, the cl_events FailureGuards hold (see `guardHold`). */
  #guardHeld = 0;
  /** Kinds of SVM allocation (bits, see svm.ts) every device was found to support, and the largest size they all take. */
  #svmKinds = 0;
  #svmMaxSize = 0;
  /**
   * Read-only and not configurable (set in the constructor): memlife checks devices against it and
   * trusts their figures (a list assigned over it, with a `localMemSize` too large, had PoCL abort).
   */
  declare readonly devices: readonly Device[];

  /** @internal use `cl.createContext()`. */
  constructor(devices?: readonly Device[]) {
    const given = Device[deviceList](devices ?? [defaultDevice()], "createContext's devices");
    // OpenCL ignores a device given twice: so does `devices`, which counted it twice (a hostile pass).
    const addresses = given.map((d) => backend.address(Device[handleOf](d)));
    const list = given.filter((_, i) => addresses.indexOf(addresses[i]) === i);
    const platform = list[0].platform;
    if (list.some((d) => d.platform !== platform)) {
      throw new TypeError("all devices of a context must come from one platform");
    }
    readOnly(this, "devices", Object.freeze(list)); // before the native create: nothing after it may throw
    const ids = pointerArray(list.map((d) => Device[handleOf](d)));
    const handle = opencl().symbols.clCreateContext(null, list.length, ids, null, 0, errcode) as Pointer | null;
    if (handle === null) throw new OpenCLError("clCreateContext", errcode[0]);
    this.#handle = handle;
    net.add(this);
  }

  /** @internal What the safety net registers (see `finalizerState`). */
  static [finalizerState](context: Context): { handle: Pointer; refs: number } | undefined {
    if (context.#handle === null || context.#released) return undefined;
    return { handle: context.#handle, refs: context.#refs };
  }

  get alive(): boolean {
    return this.#handle !== null && !this.#released;
  }

  /** @internal */
  #live(): Pointer {
    if (this.#handle === null || this.#released) throw new ReleasedError("Context");
    return this.#handle;
  }

  /**
   * @internal The same through the class, for a child's constructor: a getter of the call's
   * arguments may have given the context another prototype.
   */
  static [handleOf](context: Context): Pointer {
    if (context.#handle === null || context.#released) throw new ReleasedError("Context");
    return context.#handle;
  }

  /**
   * A buffer of `size` bytes, or holding `data`.
   * @example
   * ctx.createBuffer(1 << 20);                                 // 1 MiB, uninitialised
   * ctx.createBuffer(new Float32Array([1, 2, 3]));             // copied
   * ctx.createBuffer(hostArray, { hostPtr: "use" });           // the buffer is hostArray's memory
   */
  createBuffer(sizeOrData: number | ArrayBufferView, options?: BufferOptions): Buffer {
    const context = this.#live();
    // The usual call, a size alone, checked in place: bufferArguments costs 4–15 ns per buffer on
    // Deno and 10–20 on Node (bench/parts.ts), up to a tenth of the native create + release.
    if (options !== undefined || !isByteCount(sizeOrData)) return this.#createBufferFrom(sizeOrData, options);
    const handle = symbols.clCreateBuffer(context, MemFlags.READ_WRITE, sizeOrData, null, errcode) as Pointer | null;
    if (handle === null) throw new OpenCLError("clCreateBuffer", errcode[0]);
    return new Buffer(fromFactory, this, handle, sizeOrData, MemFlags.READ_WRITE, null);
  }

  // Out of line, as the size test is, so that V8 can inline createBuffer's usual path with the
  // Buffer constructor and release() into the caller: TurboFan inlines at most 920 bytes of
  // bytecode into one function (`--max-inlined-bytecode-size-cumulative`), and a function under
  // 28 bytes for free. Over it, create + release of a buffer costs 25-40 ns more on Deno
  // (bench/parts.ts, `--trace-turbo-inlining`).
  #createBufferFrom(sizeOrData: number | ArrayBufferView, options?: BufferOptions): Buffer {
    const { flags, size, data, held } = bufferArguments(sizeOrData, options);
    // (bufferArguments read data.buffer: an on-heap typed array has stable memory for its pointer now.)
    // The handle after the options' getters, one of which may have released the context.
    const handle = symbols.clCreateBuffer(this.#live(), flags, size, data, errcode) as Pointer | null;
    if (handle === null) throw new OpenCLError("clCreateBuffer", errcode[0]);
    return new Buffer(fromFactory, this, handle, size, flags, data, held);
  }

  /** A command queue on `device` (default: the context's first device). */
  createCommandQueue(device: Device = this.devices[0]): CommandQueue {
    this.#live();
    if (!this.devices.includes(device)) {
      throw new TypeError(`the device is not one of this context's devices, got ${show(device)}`);
    }
    return new CommandQueue(fromFactory, this, device);
  }

  /**
   * A program from OpenCL C source; `await program.build()` before making kernels.
   * @example
   * const program = ctx.createProgram(`__kernel void fill(__global int *x, int v) { x[get_global_id(0)] = v; }`);
   * await program.build();
   */
  createProgram(source: string): Program {
    this.#live();
    return new Program(this, source);
  }

  /**
   * Objects made from this context whose native side is not released yet: buffers, queues, events,
   * SVM allocations, programs, kernels, and builds running. For leak checks. An SVM allocation
   * released while commands use it counts until the last of them completed (memlife frees it
   * then); one given to `enqueueSVMFree` stops counting once the free is enqueued, though the
   * memory goes back only when that command runs (its event counts until released, like any event).
   * The references memlife holds on PoCL to commands that may fail with a user event (FailureGuard,
   * event.ts; README, Measured facts) are not counted.
   */
  get liveObjects(): number {
    return this.#children - this.#guardHeld;
  }

  /** An event the program completes itself (`setStatus()`), to hold commands back. */
  createUserEvent(): UserEvent {
    return new UserEvent(this);
  }

  /**
   * Shared virtual memory (clSVMAlloc). Needs an OpenCL 2.0 device with SVM support.
   * @example const a = ctx.svmAlloc(4096, { fineGrain: ctx.devices[0].svm.fineGrainBuffer });
   */
  svmAlloc(size: number, options?: SVMOptions): SVMAllocation {
    this.#live();
    return allocateSVM(this, size, options);
  }

  /**
   * @internal The live cl_context (see `handleOf`) where `svmPassed` already vouched for these kinds
   * of SVM allocation and this size, else null. Static, as `svmPassed`: whatever the context's prototype.
   */
  static [svmChecked](context: Context, kinds: number, size: number): Pointer | null {
    if ((context.#svmKinds & kinds) !== kinds || size > context.#svmMaxSize) return null;
    if (context.#handle === null || context.#released) throw new ReleasedError("Context");
    return context.#handle;
  }

  /** @internal The devices support these kinds of SVM allocation up to `maxSize` bytes: they will not change. */
  static [svmPassed](context: Context, kinds: number, maxSize: number): void {
    context.#svmKinds |= kinds;
    context.#svmMaxSize = maxSize;
  }

  /**
   * @internal A child (buffer, queue, event, SVM allocation, program, kernel) now depends on the
   * context. Its own native reference is dropped only after every child's: NVIDIA's final
   * clReleaseContext, even one reached through a child's release, waits for destructor callbacks
   * running on driver threads, and those wait for the JS thread on Deno and Node. Dropped last
   * and off the JS thread, it cannot deadlock. Static, as every member children call (through
   * classes.ts, this one as `cls.adopt`): a program may give its context another prototype while
   * children live (their release threw TypeError after the native release, an enqueue threw after
   * the command was enqueued, and the context was never released).
   */
  static [adoptChild](context: Context): void {
    context.#children++;
  }

  /** @internal A child released its native reference (or handed it to a command that keeps the context alive). */
  static [disownChild](context: Context): void {
    if (--context.#children === 0 && context.#released) context.#nativeRelease();
  }

  /**
   * @internal A FailureGuard (event.ts) took (+1) or let go of (-1) a command's cl_event: the context
   * stays as for a child, but `liveObjects` does not count it (memlife's own, let go by a poll once
   * the commands around it ended: README, Measured facts, PoCL).
   */
  static [guardHold](context: Context, delta: 1 | -1): void {
    context.#guardHeld += delta;
    if (delta === 1) context.#children++;
    else Context[disownChild](context);
  }

  /** @internal The cl_context for children, valid until the last child let go, even after release(). */
  static [nativeHandle](context: Context): Pointer {
    if (context.#handle === null) throw new ReleasedError("Context");
    return context.#handle;
  }

  /** CL_CONTEXT_REFERENCE_COUNT (stale at once: for debugging). */
  get referenceCount(): number {
    return infoU64(
      "clGetContextInfo",
      opencl().symbols.clGetContextInfo,
      this.#live(),
      ContextInfo.REFERENCE_COUNT,
      4,
    );
  }

  retain(): this {
    check("clRetainContext", opencl().symbols.clRetainContext(this.#live()));
    this.#refs++;
    net.renew(this);
    return this;
  }

  /** Drops a reference; after the last one the context can't make anything new. */
  release(): void {
    if (this.#handle === null || this.#released) return;
    if (--this.#refs > 0) {
      net.renew(this);
      check("clReleaseContext", opencl().symbols.clReleaseContext(this.#handle));
      return;
    }
    this.#released = true;
    net.remove(this);
    if (this.#children === 0) this.#nativeRelease();
  }

  #nativeRelease(): void {
    const handle = this.#handle;
    if (handle === null) return;
    this.#handle = null;
    releaseContext(handle);
  }

  [Symbol.dispose](): void {
    this.release();
  }

  /** The raw cl_context. Unsafe: invalid after release. */
  get unsafeHandle(): Pointer {
    return this.#live();
  }

  static {
    closeStatics(this);
  }
}

// Children reach a context through its class (see classes.ts).
register("Context", Context);
register("adopt", Context[adoptChild]);
register("disown", Context[disownChild]);

/**
 * A context on `devices` (default: see `defaultDevice`).
 * @example
 * import { cl } from "memlife";
 * using ctx = cl.createContext(cl.getPlatforms()[0].getDevices(cl.DeviceType.GPU));
 */
export function createContext(devices?: readonly Device[]): Context {
  return new Context(devices);
}
