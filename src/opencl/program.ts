/** Programs (cl_program): built from source off the JS thread, with the build log on failure. */
import type { Pointer } from "../../ffi/types.ts";
import { backend } from "../backend.ts";
import { OpenCLError } from "../errors.ts";
import { ProgramBuildInfo, ProgramInfo } from "./constants.ts";
import { check, errcode, infoString, infoU64, opencl, pointerArray } from "./native.ts";
import { OpenCLStatus } from "./status-codes.ts";
import type { Context } from "./context.ts";
import { childKind, ContextChild } from "./child.ts";
import { finalizerState } from "../callbacks.ts";
import { Device } from "./platform.ts";
import { Kernel, typedefsOfOpaqueTypes } from "./kernel.ts";
import { classes } from "./classes.ts";
import { contextOf, deviceList, fromFactory, handleOf } from "../internal.ts";

// Classes this module cannot import (see classes.ts), read at each call.
const cls = classes;

const kind = childKind({
  name: "Program",
  retainFn: "clRetainProgram",
  releaseFn: "clReleaseProgram",
  retain: (handle) => opencl().symbols.clRetainProgram(handle),
  release: (handle) => opencl().symbols.clReleaseProgram(handle),
}, (child: ContextChild) => ContextChild[finalizerState](child));

/**
 * The devices a program has an executable for: those of its newest build that succeeded (none
 * after a failed one). Shared, one object per program, with the kernels made from it, which read
 * it at each enqueue. PoCL 3.1 says CL_BUILD_SUCCESS for every device of the context after a build
 * for some of them, and a kernel enqueued on a device outside them aborts the process
 * (pocl_ndrange_kernel.c: assertion `program_dev_i < CL_UINT_MAX`, the same in C); a rebuild for
 * fewer devices drops the others' executables there.
 */
export interface Executables {
  devices: readonly Device[];
}

/** What a failed build leaves per device. */
export interface BuildLogEntry {
  readonly device: Device;
  readonly log: string;
}

const encoder = new TextEncoder();
/** CL_BUILD_SUCCESS, CL_BUILD_NONE. */
const BUILD_SUCCESS = 0;
const BUILD_NONE = -1;

/**
 * A program made from OpenCL C source. `build()` compiles it on a backend thread, so the JS
 * thread stays free; kernels come from a built program. Kernels made from it keep the native
 * program alive after `release()` (OpenCL retains it for them), and so do commands that use them.
 * @example
 * using program = ctx.createProgram("__kernel void twice(__global float *x) { x[get_global_id(0)] *= 2; }");
 * await program.build("-cl-std=CL2.0");
 * using kernel = program.createKernel("twice");
 */
export class Program extends ContextChild {
  /** A build is running: OpenCL refuses a second one on the same program (CL_INVALID_OPERATION). */
  #building = false;

  /** The context from ContextChild's private field: `this.context` can be shadowed (see `contextOf`). */
  get #context(): Context {
    return ContextChild[contextOf](this);
  }

  /** @internal use `ctx.createProgram()`. */
  constructor(context: Context, source: string) {
    if (typeof source !== "string") throw new TypeError("createProgram takes the OpenCL C source as a string");
    // clCreateProgramWithSource takes "" on PoCL, but NVIDIA's driver (580, H100) builds such a
    // program and then crashes when its kernels are asked for (SIGSEGV, a differential pass).
    if (source.length === 0) {
      throw new RangeError("createProgram: the source is empty (a program with no kernels crashes NVIDIA's driver)");
    }
    // The length passed goes past a NUL, but PoCL 3.1 ends the source there: the kernels after it
    // were silently missing.
    if (source.includes("\0")) throw new TypeError("createProgram: the source must not contain NUL characters");
    const bytes = encoder.encode(source);
    const strings = pointerArray([backend.pointerOf(bytes)]);
    const lengths = new BigUint64Array(new ArrayBuffer(8));
    lengths[0] = BigInt(bytes.byteLength);
    const handle = opencl().symbols.clCreateProgramWithSource(
      cls.Context[handleOf](context),
      1,
      strings,
      lengths,
      errcode,
    ) as
      | Pointer
      | null;
    if (handle === null) throw new OpenCLError("clCreateProgramWithSource", errcode[0]);
    super(fromFactory, handle, context, kind);
    this.#sourceText = source;
    this.#opaqueAliases = typedefsOfOpaqueTypes(source);
  }

  /** For its kernels' setArg (src/opencl/kernel.ts), given to each as it is made; each build adds its `-D` options'. */
  #opaqueAliases: ReadonlySet<string>;
  readonly #sourceText: string;
  /** See `Executables`: its kernels hold the same object. */
  readonly #executables: Executables = { devices: [] };

  /**
   * Compiles and links the program for `devices` (default: every device of the context) with
   * `options` (e.g. "-cl-std=CL2.0 -DN=4"), on a backend thread. Rejects with an OpenCLError
   * (`CL_BUILD_PROGRAM_FAILURE`) whose `buildLog` holds each device's log and whose message
   * quotes them.
   */
  async build(options = "", devices?: readonly Device[]): Promise<void> {
    this.#live();
    if (typeof options !== "string") throw new TypeError(`build options must be a string, got ${typeof options}`);
    if (options.includes("\0")) throw new TypeError("build options must not contain NUL characters");
    let list: Device[] | undefined;
    if (devices !== undefined) {
      list = Device[deviceList](devices, "build devices");
      list.forEach((d, i) => {
        if (!this.#context.devices.includes(d)) {
          throw new TypeError(`devices[${i}] is not a device of this program's context`);
        }
      });
    }
    if (this.#building) {
      throw new OpenCLError(
        "clBuildProgram",
        OpenCLStatus.CL_INVALID_OPERATION,
        "a build of this program is already running",
      );
    }
    const ids = list === undefined ? null : pointerArray(list.map((d) => Device[handleOf](d)));
    // The handle after the devices' getters, one of which may have released the program.
    const handle = this.#live();
    this.#building = true;
    // The program must outlive the build even if released meanwhile: hold a native reference.
    check("clRetainProgram", opencl().symbols.clRetainProgram(handle));
    cls.adopt(this.#context);
    let status: number;
    try {
      status = await opencl().async.clBuildProgram(
        handle,
        list?.length ?? 0,
        ids,
        withArgInfo(options),
        null,
        0,
      ) as number;
    } finally {
      this.#building = false;
    }
    try {
      if (status !== OpenCLStatus.CL_SUCCESS) {
        const logs = (list ?? [...this.#context.devices]).map((device) => ({ device, log: buildLog(handle, device) }));
        // CL_INVALID_OPERATION: nothing was built, and the logs are an earlier build's (NVIDIA's).
        const detail = status === OpenCLStatus.CL_INVALID_OPERATION
          ? "the program has kernels (OpenCL rebuilds no program with kernels attached), or another build of it runs"
          : logs.filter((l) => l.log.trim() !== "").map((l) => `[${l.device.name}]\n${l.log.trim()}`).join("\n");
        const error = new OpenCLError("clBuildProgram", status, detail);
        error.buildLog = logs;
        // CL_INVALID_OPERATION changed nothing; after any other failure no device has an executable.
        if (status !== OpenCLStatus.CL_INVALID_OPERATION) this.#executables.devices = [];
        throw error;
      }
      this.#executables.devices = list === undefined ? this.#context.devices : [...new Set(list)];
      // Kernels made from now on are this build's: its -D options may alias an object type too.
      this.#opaqueAliases = typedefsOfOpaqueTypes(this.#sourceText, options);
    } finally {
      opencl().symbols.clReleaseProgram(handle);
      cls.disown(this.#context);
    }
  }

  /** CL_PROGRAM_BUILD_LOG for `device` (default: the context's first device). */
  buildLog(device: Device = this.#context.devices[0]): string {
    if (!this.#context.devices.includes(device)) throw new TypeError("the device is not one of this program's context");
    return buildLog(this.#live(), device);
  }

  /**
   * CL_PROGRAM_BUILD_STATUS: 0 success, -1 none, -2 error, -3 in progress. A device outside the
   * newest successful build's devices has no executable: CL_BUILD_NONE (-1) where the driver says
   * success (PoCL 3.1 says it for every device of the context).
   */
  buildStatus(device: Device = this.#context.devices[0]): number {
    if (!this.#context.devices.includes(device)) throw new TypeError("the device is not one of this program's context");
    const handle = this.#live();
    const fn = opencl().symbols.clGetProgramBuildInfo;
    const status = infoU64(
      "clGetProgramBuildInfo",
      (h, p, s, v, r) => fn(h, Device[handleOf](device), p, s, v, r),
      handle,
      ProgramBuildInfo.STATUS,
      4,
    ) | 0;
    return status === BUILD_SUCCESS && !this.#executables.devices.includes(device) ? BUILD_NONE : status;
  }

  /** CL_PROGRAM_SOURCE. */
  get source(): string {
    return infoString(
      "clGetProgramInfo",
      opencl().symbols.clGetProgramInfo,
      this.#live(),
      ProgramInfo.SOURCE,
    );
  }

  /** CL_PROGRAM_KERNEL_NAMES (the program must be built). */
  get kernelNames(): string[] {
    const names = infoString(
      "clGetProgramInfo",
      opencl().symbols.clGetProgramInfo,
      this.#live(),
      ProgramInfo.KERNEL_NAMES,
    );
    return names === "" ? [] : names.split(";");
  }

  /** CL_PROGRAM_NUM_KERNELS (the program must be built). */
  get numKernels(): number {
    return infoU64(
      "clGetProgramInfo",
      opencl().symbols.clGetProgramInfo,
      this.#live(),
      ProgramInfo.NUM_KERNELS,
    );
  }

  /**
   * The kernel `name` of the built program.
   * @example const add = program.createKernel("add");
   */
  createKernel(name: string): Kernel {
    if (typeof name !== "string" || name.length === 0 || name.includes("\0")) {
      throw new TypeError(
        `a kernel name is a non-empty string without NUL, got ${
          typeof name === "string" ? JSON.stringify(name) : typeof name
        }`,
      );
    }
    const handle = opencl().symbols.clCreateKernel(this.#live(), name, errcode) as Pointer | null;
    if (handle === null) throw new OpenCLError("clCreateKernel", errcode[0], `kernel "${name}"`);
    return new Kernel(fromFactory, this, handle, this.#opaqueAliases, this.#executables);
  }

  /** Every kernel of the built program (clCreateKernelsInProgram). */
  createKernels(): Kernel[] {
    const handle = this.#live();
    const s = opencl().symbols;
    const count = new Uint32Array(new ArrayBuffer(4));
    check("clCreateKernelsInProgram", s.clCreateKernelsInProgram(handle, 0, null, count));
    if (count[0] === 0) return []; // a second call asking for 0 kernels is CL_INVALID_VALUE
    const list = new BigUint64Array(new ArrayBuffer(8 * Math.max(count[0], 1)));
    check("clCreateKernelsInProgram", s.clCreateKernelsInProgram(handle, count[0], list, null));
    const kernels: Kernel[] = [];
    for (let i = 0; i < count[0]; i++) {
      kernels.push(
        new Kernel(
          fromFactory,
          this,
          backend.fromAddress(list[i]) as Pointer,
          this.#opaqueAliases,
          this.#executables,
        ),
      );
    }
    return kernels;
  }

  /**
   * The handle, for this class's own methods: a private method, so that a program's method called
   * on a kernel, or a kernel's on a program (both contexts' children), is a TypeError, not the
   * other's handle handed to C (a program's createKernel on a kernel: PoCL aborted).
   */
  #live(): Pointer {
    return ContextChild[handleOf](this);
  }
}

/**
 * `options` with -cl-kernel-arg-info: without it PoCL 3.1 reports no argument info
 * (CL_KERNEL_ARG_INFO_NOT_AVAILABLE), and setArg could not check a value against its argument's
 * type (cl.float for an int, cl.local for a __global pointer: a NULL buffer, a crash at run time).
 */
function withArgInfo(options: string): string {
  return /(^|\s)-cl-kernel-arg-info(\s|$)/.test(options) ? options : `${options} -cl-kernel-arg-info`.trimStart();
}

function buildLog(handle: Pointer, device: Device): string {
  const fn = opencl().symbols.clGetProgramBuildInfo;
  return infoString(
    "clGetProgramBuildInfo",
    (h, p, s, v, r) => fn(h, Device[handleOf](device), p, s, v, r),
    handle,
    ProgramBuildInfo.LOG,
  );
}
