/** Kernels (cl_kernel), their arguments, and the typed scalar and vector values they take. */
import type { Pointer } from "../../ffi/types.ts";
import { backend } from "../backend.ts";
import { OpenCLError, ReleasedError } from "../errors.ts";
import { OpenCLStatus } from "./status-codes.ts";
import { integer, listLength, memoryBytes, readOnly, show, viewByteLength } from "../check.ts";
import { KernelArgAddress, KernelArgInfo, KernelExecInfo, KernelInfo, KernelWorkGroupInfo } from "./constants.ts";
import { check, infoBytes, infoString, infoU32, infoU64, opencl, optionalSymbol, pointerArray } from "./native.ts";
import { Buffer } from "./buffer.ts";
import { SVMAllocation } from "./svm.ts";
import { Device } from "./platform.ts";
import type { Executables, Program } from "./program.ts";
import type { Context } from "./context.ts";
import {
  closeStatics,
  commandHandle,
  commandUses,
  contextOf,
  executableOn,
  fromFactory,
  genuine,
  handleOf,
  localMemoryFits,
  notByNew,
  svmPointer,
} from "../internal.ts";
import { childKind, ContextChild } from "./child.ts";
import { finalizerState } from "../callbacks.ts";

const kind = childKind({
  name: "Kernel",
  retainFn: "clRetainKernel",
  releaseFn: "clReleaseKernel",
  retain: (handle) => opencl().symbols.clRetainKernel(handle),
  release: (handle) => opencl().symbols.clReleaseKernel(handle),
  lastRelease: (kernel) => dropArguments(kernel as Kernel),
}, (child: ContextChild) => ContextChild[finalizerState](child));
/** Set by Kernel's static block: forgets a released kernel's arguments (it may be kept). */
let dropArguments: (kernel: Kernel) => void;

// --- typed values --------------------------------------------------------------------------------

/** OpenCL C scalar types a kernel argument can have, with their size and how JS writes them. */
const scalars = {
  char: { size: 1, array: Int8Array, min: -128, max: 127 },
  uchar: { size: 1, array: Uint8Array, min: 0, max: 255 },
  short: { size: 2, array: Int16Array, min: -32768, max: 32767 },
  ushort: { size: 2, array: Uint16Array, min: 0, max: 65535 },
  int: { size: 4, array: Int32Array, min: -2147483648, max: 2147483647 },
  uint: { size: 4, array: Uint32Array, min: 0, max: 4294967295 },
  long: { size: 8, array: BigInt64Array, min: -(2n ** 63n), max: 2n ** 63n - 1n },
  ulong: { size: 8, array: BigUint64Array, min: 0n, max: 2n ** 64n - 1n },
  float: { size: 4, array: Float32Array, min: -Infinity, max: Infinity },
  double: { size: 8, array: Float64Array, min: -Infinity, max: Infinity },
} as const;
export type ScalarType = keyof typeof scalars;
const widths = [1, 2, 3, 4, 8, 16] as const;

/**
 * A scalar or vector value for a by-value kernel argument, with its OpenCL C type: made by
 * `cl.int(5)`, `cl.float4(1, 2, 3, 4)`, `cl.ulong(2n ** 40n)`.
 */
export class TypedValue {
  /** The OpenCL C type name, e.g. "float4". */
  readonly type: string;
  /** The bytes clSetKernelArg copies (a 3-vector takes the size of a 4-vector, as in OpenCL C). */
  readonly bytes: Uint8Array;
  /** @internal use the factories (`cl.int`, `cl.float4`, ...). */
  constructor(type: string, bytes: Uint8Array) {
    this.type = type;
    this.bytes = bytes;
    Object.freeze(this);
  }
}

/** `__local` memory of `size` bytes for one kernel argument: `kernel.setArg(2, cl.local(256))`. */
export class LocalMemory {
  readonly size: number;
  /** @internal use `cl.local(bytes)`. */
  constructor(size: number) {
    this.size = integer(size, "size_t", "local memory size (bytes)", 1);
    Object.freeze(this);
  }
}

/** `__local` memory of `bytes` bytes for a kernel argument. */
export function local(bytes: number): LocalMemory {
  return new LocalMemory(bytes);
}

function makeValue(scalar: ScalarType, width: number, values: unknown[]): TypedValue {
  const name = width === 1 ? scalar : `${scalar}${width}`;
  if (values.length !== width) {
    throw new TypeError(`cl.${name} takes ${width} value${width === 1 ? "" : "s"}, got ${values.length}`);
  }
  const info = scalars[scalar];
  const slots = width === 3 ? 4 : width;
  const bytes = new Uint8Array(new ArrayBuffer(info.size * slots));
  const view = new info.array(bytes.buffer) as unknown as { [i: number]: number | bigint };
  const wide = info.size === 8 && typeof info.min === "bigint";
  const integer = info.min !== -Infinity;
  for (let i = 0; i < width; i++) {
    const v = values[i];
    if (wide) {
      if (typeof v !== "bigint" && !(typeof v === "number" && Number.isSafeInteger(v))) {
        throw new TypeError(
          `cl.${name}: value ${i} must be a bigint or a safe integer, got ${typeof v === "number" ? v : typeof v}`,
        );
      }
      const big = BigInt(v);
      if (big < (info.min as bigint) || big > (info.max as bigint)) {
        throw new RangeError(`cl.${name}: value ${i} (${big}) is out of range for ${scalar}`);
      }
      view[i] = big;
    } else {
      if (typeof v !== "number") throw new TypeError(`cl.${name}: value ${i} must be a number, got ${typeof v}`);
      if (integer) {
        if (!Number.isInteger(v) || v < (info.min as number) || v > (info.max as number)) {
          throw new RangeError(`cl.${name}: value ${i} (${v}) is not an integer in ${info.min}..${info.max}`);
        }
      } else if (info.size === 4 && Number.isFinite(v) && !Number.isFinite(Math.fround(v))) {
        // Stored, it would silently become Infinity. (Infinity and NaN given as such are floats.)
        throw new RangeError(`cl.${name}: value ${i} (${v}) is beyond the float range (±3.4028235e38)`);
      }
      view[i] = v;
    }
  }
  return new TypedValue(name, bytes);
}

type Num = number;
type Int64 = number | bigint;
function factory(scalar: ScalarType, width: number): (...values: unknown[]) => TypedValue {
  return (...values: unknown[]) => makeValue(scalar, width, values);
}

/** Every `cl.<type><width>` factory, e.g. `int`, `int4`, `float16`. */
function factories() {
  const out: Record<string, (...values: never[]) => TypedValue> = {};
  for (const scalar of Object.keys(scalars) as ScalarType[]) {
    for (const w of widths) out[w === 1 ? scalar : `${scalar}${w}`] = factory(scalar, w);
  }
  return out;
}
const f = factories();
type F<T> = (...values: T[]) => TypedValue;
export const char = f.char as F<Num>,
  char2 = f.char2 as F<Num>,
  char3 = f.char3 as F<Num>,
  char4 = f.char4 as F<Num>,
  char8 = f.char8 as F<Num>,
  char16 = f.char16 as F<Num>;
export const uchar = f.uchar as F<Num>,
  uchar2 = f.uchar2 as F<Num>,
  uchar3 = f.uchar3 as F<Num>,
  uchar4 = f.uchar4 as F<Num>,
  uchar8 = f.uchar8 as F<Num>,
  uchar16 = f.uchar16 as F<Num>;
export const short = f.short as F<Num>,
  short2 = f.short2 as F<Num>,
  short3 = f.short3 as F<Num>,
  short4 = f.short4 as F<Num>,
  short8 = f.short8 as F<Num>,
  short16 = f.short16 as F<Num>;
export const ushort = f.ushort as F<Num>,
  ushort2 = f.ushort2 as F<Num>,
  ushort3 = f.ushort3 as F<Num>,
  ushort4 = f.ushort4 as F<Num>,
  ushort8 = f.ushort8 as F<Num>,
  ushort16 = f.ushort16 as F<Num>;
export const int = f.int as F<Num>,
  int2 = f.int2 as F<Num>,
  int3 = f.int3 as F<Num>,
  int4 = f.int4 as F<Num>,
  int8 = f.int8 as F<Num>,
  int16 = f.int16 as F<Num>;
export const uint = f.uint as F<Num>,
  uint2 = f.uint2 as F<Num>,
  uint3 = f.uint3 as F<Num>,
  uint4 = f.uint4 as F<Num>,
  uint8 = f.uint8 as F<Num>,
  uint16 = f.uint16 as F<Num>;
export const long = f.long as F<Int64>,
  long2 = f.long2 as F<Int64>,
  long3 = f.long3 as F<Int64>,
  long4 = f.long4 as F<Int64>,
  long8 = f.long8 as F<Int64>,
  long16 = f.long16 as F<Int64>;
export const ulong = f.ulong as F<Int64>,
  ulong2 = f.ulong2 as F<Int64>,
  ulong3 = f.ulong3 as F<Int64>,
  ulong4 = f.ulong4 as F<Int64>,
  ulong8 = f.ulong8 as F<Int64>,
  ulong16 = f.ulong16 as F<Int64>;
export const float = f.float as F<Num>,
  float2 = f.float2 as F<Num>,
  float3 = f.float3 as F<Num>,
  float4 = f.float4 as F<Num>,
  float8 = f.float8 as F<Num>,
  float16 = f.float16 as F<Num>;
export const double = f.double as F<Num>,
  double2 = f.double2 as F<Num>,
  double3 = f.double3 as F<Num>,
  double4 = f.double4 as F<Num>,
  double8 = f.double8 as F<Num>,
  double16 = f.double16 as F<Num>;

/** The byte size of an OpenCL C by-value type name ("float4", "uint"), or undefined for others (structs, typedefs). */
function typeSize(name: string): number | undefined {
  const m = /^(?:unsigned )?(char|uchar|short|ushort|int|uint|long|ulong|float|double)(\d*)$/.exec(name.trim());
  if (m === null) return undefined;
  const width = m[2] === "" ? 1 : Number(m[2]);
  if (!(widths as readonly number[]).includes(width)) return undefined;
  return scalars[m[1] as ScalarType].size * (width === 3 ? 4 : width);
}

/** Normalises "unsigned int" to "uint" so that driver spellings compare with ours. */
function canonicalType(name: string): string {
  return name.trim().replace(/^unsigned (char|short|int|long)/, "u$1");
}

// --- kernels -------------------------------------------------------------------------------------

/** What the driver says about one argument (clGetKernelArgInfo), when it can say. */
interface ArgInfo {
  readonly address: number;
  readonly typeName: string;
  readonly name: string;
  /** An OpenCL object (image, pipe, sampler, device queue or event), which memlife has none of. */
  readonly opaque: boolean;
}

/** A value `setArg` accepts. */
export type KernelArg = Buffer | SVMAllocation | null | LocalMemory | TypedValue | ArrayBufferView;

const argSlot = new BigUint64Array(new ArrayBuffer(8));
const sizeScratch = new BigUint64Array(new ArrayBuffer(8 * 3));
let clSetKernelArgSVMPointer: ((...args: unknown[]) => unknown) | undefined;

/**
 * A kernel of a built program. Arguments set with `setArg` are kept (JS and native) until
 * replaced or the kernel is released; an enqueued command uses the values they had when it was
 * enqueued.
 * @example
 * kernel.setArg(0, a).setArg(1, b).setArg(2, cl.uint(n));
 * await queue.enqueueNDRangeKernel(kernel, [n]).wait();
 */
/**
 * The names a program's source makes aliases of OpenCL object types, through typedefs (chains
 * included): the driver reports an argument by its alias (`typedef sampler_t smp;` reads "smp"),
 * which passed for a struct of 8 bytes (PoCL crashed in clSetKernelArg). Read as the preprocessor
 * would first see it (comments and continued lines), with the lists of a typedef
 * (`typedef sampler_t a, b;`) and the object-like macros of the source and of `-D` build options
 * that name such a type (`#define SMP sampler_t`, then `typedef SMP s;`): each of those hid one.
 * A typedef a function-like macro makes, or an `#include`d header's, is beyond it.
 */
export function typedefsOfOpaqueTypes(source: string, options = ""): ReadonlySet<string> {
  const found = new Set<string>();
  const typedefs: [base: string, alias: string][] = [];
  const text = source.replace(/\\\r?\n/g, "").replace(/\/\*[\s\S]*?\*\/|\/\/[^\n]*/g, " ");
  for (const m of text.matchAll(typedefPattern)) {
    // A pointer to an object type (`*p`) is not one.
    for (const name of m[2].split(",")) if (!name.includes("*")) typedefs.push([m[1], name.trim()]);
  }
  for (const m of text.matchAll(definePattern)) typedefs.push([m[2], m[1]]);
  for (const m of options.matchAll(optionDefinePattern)) typedefs.push([m[2], m[1]]);
  for (let grew = true; grew;) {
    grew = false;
    for (const [base, alias] of typedefs) {
      if (!found.has(alias) && (openclObjectType.test(base) || found.has(base))) {
        found.add(alias);
        grew = true;
      }
    }
  }
  return found;
}

const qualifiers = String.raw`(?:(?:__)?(?:read_only|write_only|read_write)|const|volatile)`;
/** `typedef [qualifiers] base [qualifiers] name[, name...];` (a name may be a pointer's, `*name`). */
const typedefPattern = new RegExp(
  String.raw`\btypedef\s+(?:${qualifiers}\s+)*([A-Za-z_]\w*)(?:\s+${qualifiers}\b)*\s*(\**\s*[A-Za-z_]\w*` +
    String.raw`(?:\s*,\s*\**\s*[A-Za-z_]\w*)*)\s*;`,
  "g",
);
/** `#define NAME [qualifiers] base`, an object-like macro whose body is one type. */
const definePattern = new RegExp(
  String.raw`^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+(?:${qualifiers}[ \t]+)*([A-Za-z_]\w*)[ \t]*$`,
  "gm",
);
/** `-DNAME=base` or `-D NAME=base` in build options. */
const optionDefinePattern = /(?:^|\s)-D\s*([A-Za-z_]\w*)=([A-Za-z_]\w*)(?=\s|$)/g;

/** CL_KERNEL_ARG_ACCESS_NONE: any other access qualifier is an image's or a pipe's. */
const KERNEL_ARG_ACCESS_NONE = 0x11a3;

/** Argument types that are OpenCL objects (cl_mem images and pipes, cl_sampler, device-side queues and events). */
const openclObjectType =
  /^(?:(?:__)?(?:read_only|write_only|read_write)\s+)?(?:image[123]d\w*_t|sampler_t|queue_t|clk_event_t|reserve_id_t|event_t)$|^(?:(?:__)?(?:read_only|write_only)\s+)?pipe\b/;

/** The context of a buffer or an SVM allocation, brand-checked before: from its private field. */
function memoryContext(memory: Buffer | SVMAllocation): Context {
  return SVMAllocation[genuine](memory) ? SVMAllocation[contextOf](memory) : Buffer[contextOf](memory);
}

export class Kernel extends ContextChild {
  /** The memory objects set as arguments: checked alive at enqueue, pinned by commands. */
  #args: unknown[];
  /** The bytes of each cl.local() argument (0: not one), for `localMemoryFits`. */
  #localBytes: number[];
  #argInfo: (ArgInfo | null)[] | undefined;
  #svmPointers: SVMAllocation[] = [];

  /** @internal Whether `value` is one itself, not a Proxy of one (see `genuine` in internal.ts). */
  static [genuine](value: unknown): value is Kernel {
    return typeof value === "object" && value !== null && #args in value;
  }

  // Read-only and not configurable (set in the constructor): setArg trusts them (another program's
  // typedefs let 8 bytes through as a sampler: SIGSEGV at the enqueue).
  declare readonly program: Program;
  /** CL_KERNEL_FUNCTION_NAME. */
  declare readonly name: string;
  /** CL_KERNEL_NUM_ARGS. */
  declare readonly numArgs: number;

  /** The context from ContextChild's private field: `this.context` can be shadowed (see `contextOf`). */
  get #context(): Context {
    return ContextChild[contextOf](this);
  }

  /** The program's typedefs of OpenCL object types (see `typedefsOfOpaqueTypes`), as the program gave them. */
  readonly #opaqueAliases: ReadonlySet<string>;

  /** The devices its program has an executable for (see `Executables` in program.ts). */
  readonly #executables: Executables;

  /** @internal use `program.createKernel()`. */
  constructor(
    made: typeof fromFactory,
    program: Program,
    handle: Pointer,
    opaqueAliases: ReadonlySet<string>,
    executables: Executables,
  ) {
    if (made !== fromFactory) notByNew("cl.Kernel", "program.createKernel()");
    const info = opencl().symbols.clGetKernelInfo;
    let name: string, numArgs: number;
    try {
      name = infoString("clGetKernelInfo", info, handle, KernelInfo.FUNCTION_NAME);
      numArgs = infoU32("clGetKernelInfo", info, handle, KernelInfo.NUM_ARGS);
    } catch (error) {
      opencl().symbols.clReleaseKernel(handle);
      throw error;
    }
    super(fromFactory, handle, ContextChild[contextOf](program), kind);
    readOnly(this, "name", name);
    readOnly(this, "numArgs", numArgs);
    readOnly(this, "program", program);
    this.#opaqueAliases = opaqueAliases;
    this.#executables = executables;
    this.#args = new Array(numArgs).fill(undefined);
    this.#localBytes = new Array(numArgs).fill(0);
  }

  /** Per-argument driver info, queried once; null entries where the driver gives none. */
  #info(index: number): ArgInfo | null {
    if (this.#argInfo === undefined) {
      const fn = opencl().symbols.clGetKernelArgInfo;
      const handle = this.#live();
      this.#argInfo = [];
      for (let i = 0; i < this.numArgs; i++) {
        if (fn === undefined) {
          this.#argInfo.push(null);
          continue;
        }
        const at = (h: Pointer, p: number, s: number, v: ArrayBufferView | null, r: ArrayBufferView | null) =>
          fn(h, i, p, s, v, r) as number;
        try {
          const typeName = infoString("clGetKernelArgInfo", at, handle, KernelArgInfo.TYPE_NAME);
          const access = infoU32("clGetKernelArgInfo", at, handle, KernelArgInfo.ACCESS_QUALIFIER);
          this.#argInfo.push({
            address: infoU32("clGetKernelArgInfo", at, handle, KernelArgInfo.ADDRESS_QUALIFIER),
            typeName,
            name: infoString("clGetKernelArgInfo", at, handle, KernelArgInfo.NAME),
            opaque: access !== KERNEL_ARG_ACCESS_NONE || openclObjectType.test(typeName) ||
              this.#opaqueAliases.has(typeName.trim()),
          });
        } catch {
          // CL_KERNEL_ARG_INFO_NOT_AVAILABLE (built without -cl-kernel-arg-info): the driver checks sizes only.
          this.#argInfo.push(null);
        }
      }
    }
    return this.#argInfo[index];
  }

  /**
   * The argument's name and OpenCL C type as the driver reports them ("float*", "uint4"), and its
   * address space; undefined where the driver keeps them (some need `-cl-kernel-arg-info`).
   */
  argInfo(
    index: number,
  ): { name: string; typeName: string; addressSpace: "global" | "local" | "constant" | "private" } | undefined {
    index = this.#checkIndex(index);
    const info = this.#info(index);
    if (info === null) return undefined;
    const addressSpace = info.address === KernelArgAddress.GLOBAL
      ? "global"
      : info.address === KernelArgAddress.LOCAL
      ? "local"
      : info.address === KernelArgAddress.CONSTANT
      ? "constant"
      : "private";
    return { name: info.name, typeName: info.typeName, addressSpace };
  }

  /** The index checked, -0 as 0 (Deno's FFI refuses -0 for a u32 until the call is optimized). */
  #checkIndex(index: number): number {
    this.#live();
    if (typeof index !== "number") throw new TypeError(`an argument index is a number, got ${show(index)}`);
    if (!Number.isInteger(index) || index < 0 || index >= this.numArgs) {
      throw new RangeError(`kernel "${this.name}" has ${this.numArgs} argument(s): index ${index} is out of range`);
    }
    return index === 0 ? 0 : index;
  }

  /**
   * Sets argument `index`: a `cl.Buffer`, a `cl.SVMAllocation` (clSetKernelArgSVMPointer),
   * `null` (a NULL buffer), `cl.local(bytes)`, a typed value (`cl.int(5)`, `cl.float4(...)`), or an
   * ArrayBufferView holding the value's bytes. Checked against the argument's declared type where
   * the driver reports it. Returns the kernel, to chain.
   */
  setArg(index: number, value: KernelArg): this {
    index = this.#checkIndex(index);
    const info = this.#info(index);
    const where = () =>
      `kernel "${this.name}" argument ${index}${info !== null ? ` (${info.typeName} ${info.name})` : ""}`;
    // An image reports the global address space and a sampler a type memlife cannot size: either
    // let a buffer, null or any 8 bytes through as the object's handle (PoCL: SIGSEGV at the enqueue).
    // Images and pipes have an access qualifier; a typedef is known from the program's source.
    if (info !== null && info.opaque) {
      throw new TypeError(
        `${where()} is an OpenCL ${info.typeName} object: memlife has no images, samplers, pipes or device queues to pass`,
      );
    }
    const s = opencl().symbols;
    const isPointer = info === null || info.address === KernelArgAddress.GLOBAL ||
      info.address === KernelArgAddress.CONSTANT;
    // The brands and the classes' accessors decide, not `instanceof` or the value's methods: a
    // buffer or allocation given another prototype is one all the same.
    const svm = SVMAllocation[genuine](value);
    if (svm || Buffer[genuine](value) || value === null) {
      if (!isPointer) {
        throw new TypeError(
          `${where()} is not a __global or __constant pointer: it cannot take a ${
            value === null ? "null buffer" : svm ? "SVMAllocation" : "Buffer"
          }`,
        );
      }
      if (value !== null && memoryContext(value) !== this.#context) {
        throw new TypeError(`${where()}: the memory belongs to another context than the kernel`);
      }
      if (svm) {
        const setSVM = clSetKernelArgSVMPointer ??= optionalSymbol(
          "clSetKernelArgSVMPointer",
          "an OpenCL 2.0 platform",
        );
        const status = setSVM(this.#live(), index, SVMAllocation[svmPointer](value)) as number;
        check("clSetKernelArgSVMPointer", status, where);
      } else {
        // A hostPtr "use" buffer whose host memory was transferred away is refused, as by commands.
        argSlot[0] = value === null ? 0n : backend.address(Buffer[commandHandle](value));
        const status = s.clSetKernelArg(this.#live(), index, 8, argSlot);
        check("clSetKernelArg", status, where);
      }
      this.#args[index] = value;
      this.#notLocal(index);
      return this;
    }
    if (value instanceof LocalMemory) {
      if (info !== null && info.address !== KernelArgAddress.LOCAL) {
        throw new TypeError(`${where()} is not a __local pointer: cl.local() does not fit it`);
      }
      // Read once and checked again: a Proxy of a LocalMemory could answer anything, twice.
      const size = integer(value.size, "size_t", "local memory size (bytes)", 1);
      // More than a device has fails an assertion in PoCL 3.1 at the enqueue (the process aborts).
      const limit = Math.min(...this.#context.devices.map((d) => d.localMemSize));
      if (size > limit) {
        throw new RangeError(`${where()}: cl.local(${size}) is more than the device's ${limit} bytes of local memory`);
      }
      const status = s.clSetKernelArg(this.#live(), index, size, null);
      check("clSetKernelArg", status, where);
      this.#args[index] = undefined;
      this.#localBytes[index] = size;
      this.#localFits = null; // the sum changed: asked again at the next enqueue
      return this;
    }
    let bytes: ArrayBufferView;
    if (value instanceof TypedValue) {
      if (
        info !== null && info.address === KernelArgAddress.PRIVATE && typeSize(info.typeName) !== undefined &&
        canonicalType(info.typeName) !== value.type
      ) {
        throw new TypeError(`${where()} takes a ${canonicalType(info.typeName)}, got a cl.${value.type}`);
      }
      bytes = value.bytes;
    } else if (ArrayBuffer.isView(value)) {
      // clSetKernelArg copies the bytes at once: a resizable ArrayBuffer is as good as any here.
      const length = memoryBytes(value, where(), false);
      if (length === 0) throw new RangeError(`${where()}: the view is empty`);
      const expected = info !== null ? typeSize(info.typeName) : undefined;
      if (expected !== undefined && length !== expected) {
        throw new RangeError(`${where()} takes ${expected} bytes, the view has ${length}`);
      }
      bytes = value;
    } else {
      throw new TypeError(
        `${where()}: expected a cl.Buffer, cl.SVMAllocation, null, cl.local(bytes), a typed value such as cl.int(5), or an ArrayBufferView, got ${typeof value}`,
      );
    }
    if (info !== null && info.address !== KernelArgAddress.PRIVATE) {
      throw new TypeError(
        `${where()} is a pointer: it takes a cl.Buffer, a cl.SVMAllocation, null or cl.local(), not a value`,
      );
    }
    const length = viewByteLength(bytes);
    // The program's getters (a view's subclass, a typed value's) have all run: take the handle now.
    const status = s.clSetKernelArg(this.#live(), index, length, bytes);
    check("clSetKernelArg", status, where);
    this.#args[index] = undefined;
    this.#notLocal(index);
    return this;
  }

  /** Argument `index` is set to something other than cl.local(). */
  #notLocal(index: number): void {
    if (this.#localBytes[index] === 0) return;
    this.#localBytes[index] = 0;
    this.#localFits = null;
  }

  /**
   * The SVM allocations the kernel reaches through pointers stored in memory rather than through
   * its arguments (CL_KERNEL_EXEC_INFO_SVM_PTRS). Commands keep them alive like arguments.
   */
  setSVMPointers(allocations: readonly SVMAllocation[]): this {
    this.#live();
    if (!Array.isArray(allocations)) throw new TypeError("setSVMPointers takes an array of cl.SVMAllocation");
    // Each element read once (a hole reads undefined): what commands keep alive must be what the
    // kernel was given. Pointers and handle only once every element's getter has run.
    const kept: SVMAllocation[] = new Array(listLength(allocations, "setSVMPointers' allocations"));
    for (let i = 0; i < kept.length; i++) {
      const a = allocations[i];
      if (!SVMAllocation[genuine](a)) {
        throw new TypeError(`allocations[${i}] is not a cl.SVMAllocation, got ${show(a)}`);
      }
      if (SVMAllocation[contextOf](a) !== this.#context) {
        throw new TypeError(`allocations[${i}] belongs to another context than the kernel`);
      }
      kept[i] = a;
    }
    const handle = this.#live();
    const pointers = kept.map((a) => SVMAllocation[svmPointer](a));
    const fn = optionalSymbol("clSetKernelExecInfo", "an OpenCL 2.0 platform");
    const list = pointerArray(pointers);
    check(
      "clSetKernelExecInfo",
      fn(handle, KernelExecInfo.SVM_PTRS, 8 * pointers.length, pointers.length === 0 ? null : list) as number,
    );
    this.#svmPointers = kept;
    return this;
  }

  /**
   * @internal At enqueue: throws ReleasedError for an argument released since it was set (its
   * cl_mem or SVM pointer would dangle), and returns the SVM allocations the command uses.
   */
  static [commandUses](kernel: Kernel): SVMAllocation[] | undefined {
    const args = kernel.#args;
    let svm: SVMAllocation[] | undefined;
    for (let i = 0; i < args.length; i++) {
      const a = args[i];
      if (a === undefined || a === null) continue;
      // The brand and the private handles decide, not `alive` or `instanceof`: a program can give
      // an object an own `alive` or another prototype (a released buffer then reached C as an SVM
      // allocation's argument: PoCL abort, SIGSEGV).
      const isBuffer = Buffer[genuine](a);
      try {
        // TypeError too: a hostPtr "use" buffer's memory transferred away.
        if (isBuffer) Buffer[commandHandle](a);
        else SVMAllocation[svmPointer](a as SVMAllocation);
      } catch (error) {
        if (!(error instanceof ReleasedError)) throw error;
        throw new ReleasedError(
          `${isBuffer ? "Buffer" : "SVMAllocation"} set as argument ${i} of kernel "${kernel.name}"`,
        );
      }
      if (!isBuffer) (svm ??= []).push(a as SVMAllocation);
    }
    const extra = kernel.#svmPointers;
    for (let i = 0; i < extra.length; i++) {
      try {
        SVMAllocation[svmPointer](extra[i]);
      } catch (error) {
        if (!(error instanceof ReleasedError)) throw error;
        throw new ReleasedError(`SVMAllocation given to setSVMPointers of kernel "${kernel.name}"`);
      }
      (svm ??= []).push(extra[i]);
    }
    return svm;
  }

  /** CL_KERNEL_WORK_GROUP_SIZE on `device` (default: the context's first). */
  workGroupSize(device: Device = this.#context.devices[0]): number {
    return this.#workGroupInfo(device, KernelWorkGroupInfo.WORK_GROUP_SIZE);
  }

  /** CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE on `device`. */
  preferredWorkGroupSizeMultiple(device: Device = this.#context.devices[0]): number {
    return this.#workGroupInfo(device, KernelWorkGroupInfo.PREFERRED_WORK_GROUP_SIZE_MULTIPLE);
  }

  /** The device whose local memory this kernel's was last found to fit (see `localMemoryFits`). */
  #localFits: Device | null = null;

  /**
   * @internal RangeError unless the kernel's local memory fits `device`'s: CL_KERNEL_LOCAL_MEM_SIZE
   * counts its own __local variables and its cl.local() arguments together. Each argument is
   * checked alone at setArg; two of 0.6x the device's, or a __local array over it, passed that and
   * failed an assertion in PoCL 3.1 at the enqueue (the process aborted). PoCL 5.0 counts no
   * cl.local() argument in it (0 for two of 0.6x, on the GPU machine), and aborts the same way: an
   * answer below the arguments' own sum has them added. Asked once per device until a cl.local()
   * argument changes.
   */
  static [localMemoryFits](kernel: Kernel, device: Device): void {
    if (kernel.#localFits === device) return;
    const reported = kernel.#workGroupInfo(device, KernelWorkGroupInfo.LOCAL_MEM_SIZE);
    let args = 0;
    for (const bytes of kernel.#localBytes) args += bytes;
    const used = reported < args ? reported + args : reported;
    if (used > device.localMemSize) {
      throw new RangeError(
        `kernel "${kernel.name}" needs ${used} bytes of local memory (its __local variables and cl.local() arguments together), more than the device's ${device.localMemSize}`,
      );
    }
    kernel.#localFits = device;
  }

  /**
   * @internal OpenCLError CL_INVALID_PROGRAM_EXECUTABLE (as clEnqueueNDRangeKernel defines it) unless
   * the kernel's program was built for `device`, before the native call: PoCL 3.1 aborted the
   * process there (see `Executables`).
   */
  static [executableOn](kernel: Kernel, device: Device): void {
    const built = kernel.#executables.devices;
    if (built.includes(device)) return;
    throw new OpenCLError(
      "clEnqueueNDRangeKernel",
      OpenCLStatus.CL_INVALID_PROGRAM_EXECUTABLE,
      `kernel "${kernel.name}": its program was not built for the queue's device (${device.name}, devices[${
        kernel.#context.devices.indexOf(device)
      }] of the context); its newest successful build was for ${
        built.length === 0 ? "no device" : built.map((d) => `devices[${kernel.#context.devices.indexOf(d)}]`).join(", ")
      }: build it for this device (program.build(options, devices) without devices builds for all)`,
    );
  }

  /** CL_KERNEL_LOCAL_MEM_SIZE on `device`, in bytes. */
  localMemSize(device: Device = this.#context.devices[0]): number {
    return this.#workGroupInfo(device, KernelWorkGroupInfo.LOCAL_MEM_SIZE);
  }

  /** CL_KERNEL_COMPILE_WORK_GROUP_SIZE: the reqd_work_group_size attribute, or [0, 0, 0]. */
  compileWorkGroupSize(device: Device = this.#context.devices[0]): number[] {
    if (!this.#context.devices.includes(device)) throw new TypeError("the device is not one of this kernel's context");
    const fn = opencl().symbols.clGetKernelWorkGroupInfo;
    const bytes = infoBytes(
      "clGetKernelWorkGroupInfo",
      (h, p, s, v, r) => fn(h, Device[handleOf](device), p, s, v, r),
      this.#live(),
      KernelWorkGroupInfo.COMPILE_WORK_GROUP_SIZE,
    );
    return [...new BigUint64Array(bytes.buffer, 0, 3)].map(Number);
  }

  #workGroupInfo(device: Device, param: number): number {
    if (!this.#context.devices.includes(device)) throw new TypeError("the device is not one of this kernel's context");
    const fn = opencl().symbols.clGetKernelWorkGroupInfo;
    return infoU64(
      "clGetKernelWorkGroupInfo",
      (h, p, s, v, r) => fn(h, Device[handleOf](device), p, s, v, r),
      this.#live(),
      param,
    );
  }

  // Commands already enqueued with it still run: OpenCL keeps the kernel (and its program) until
  // they complete, and the command holds what it uses.
  static {
    dropArguments = (kernel) => {
      kernel.#args = [];
      kernel.#svmPointers = [];
    };
  }

  static {
    closeStatics(this);
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
 * @internal Fills the size_t arrays of clEnqueueNDRangeKernel from `global`, `local`, `offset`,
 * checking them first. Returns the work dimension; the arrays are shared scratch, read during the call only.
 */
export function ndrangeSizes(
  global: readonly number[],
  local: readonly number[] | undefined,
  offset: readonly number[] | undefined,
): {
  dim: number;
  global: BigUint64Array;
  local: BigUint64Array | null;
  offset: BigUint64Array | null;
} {
  // Each length read once: a Proxy's could answer 1 to the check and 5 to the loop.
  const dim = Array.isArray(global) ? listLength(global, "globalSize") : 0;
  if (dim < 1 || dim > 3) throw new TypeError("globalSize must be an array of 1 to 3 positive integers");
  // Read (each element once) before anything is written to the shared scratch: an element's
  // getter that enqueued another kernel would write its own sizes there.
  const sizes = [0, 0, 0];
  for (let i = 0; i < dim; i++) sizes[i] = positive(global[i], `globalSize[${i}]`);
  // 2^32 work-groups or more, in one dimension or in all: PoCL 3.1 numbers them in 32 bits, and
  // the kernel dies (SIGILL, SIGFPE, a failed assertion; plain C too) or silently skips
  // work-items. No device runs that many; refused for every driver.
  let groups = 1;
  let l: BigUint64Array | null = null;
  if (local !== undefined) {
    if (!Array.isArray(local) || listLength(local, "local") !== dim) {
      throw new TypeError(`local must be an array of ${dim} positive integer(s), like globalSize`);
    }
    l = new BigUint64Array(new ArrayBuffer(8 * 3));
    // A size that does not divide the global size is left to the driver: OpenCL 2.0 allows a
    // non-uniform last group, 1.2 devices refuse it with CL_INVALID_WORK_GROUP_SIZE.
    for (let i = 0; i < dim; i++) {
      const size = positive(local[i], `local[${i}]`);
      groups *= Math.ceil(sizes[i] / size);
      l[i] = BigInt(size);
    }
    if (groups >= 2 ** 32) {
      throw new RangeError(
        `globalSize / local makes ${groups} work-groups (${
          sizes.slice(0, dim).map((s, i) => Math.ceil(s / Number(l![i]))).join(" x ")
        }): at most 2^32 - 1`,
      );
    }
  } else {
    // The driver picks the work-group size, and may pick 1 (PoCL does for a prime size): every
    // work-item may be a work-group of its own.
    for (let i = 0; i < dim; i++) groups *= sizes[i];
    if (groups >= 2 ** 32) {
      throw new RangeError(
        `globalSize makes ${groups} work-items, which without a local size may be as many work-groups ` +
          "(at most 2^32 - 1): give local",
      );
    }
  }
  let o: BigUint64Array | null = null;
  if (offset !== undefined) {
    if (!Array.isArray(offset) || listLength(offset, "offset") !== dim) {
      throw new TypeError(`offset must be an array of ${dim} non-negative integer(s), like globalSize`);
    }
    o = new BigUint64Array(new ArrayBuffer(8 * 3));
    for (let i = 0; i < dim; i++) {
      o[i] = BigInt(integer(offset[i], "size_t", `offset[${i}]`));
    }
  }
  const g = sizeScratch;
  for (let i = 0; i < dim; i++) g[i] = BigInt(sizes[i]);
  return { dim, global: g, local: l, offset: o };
}

function positive(v: unknown, what: string): number {
  return integer(v, "size_t", what, 1);
}
