/**
 * The raw floor's bindings for the create and SVM cases: the fastest call form each runtime offers
 * for the same native calls, so that memlife / raw is what memlife costs and never less than 1
 * because the floor was slower than it had to be (issue 14).
 *
 * - Bun and Node: the backend's bindings are the runtime's own functions (bun:ffi `dlopen`,
 *   koffi's `func`) with no wrapper; a size goes as a number, their fastest form.
 * - Deno: `Deno.dlopen` itself, not the backend's wrappers: 64-bit integers go as bigints (the
 *   only form V8's fast call takes), and a call in which nothing can call back into JS keeps the
 *   fast call even for symbols the backend marks `reentrant`. An SVM pointer and an event, which
 *   the loops write into a `BigUint64Array` or read from one, are declared `u64`: they stay
 *   bigints, with no conversion to and from a pointer object (Deno's own conversions are ops of
 *   55-65 ns each; memlife's, through the prebuilt library, 9). Where a JS callback may run inside
 *   the call (a destructor inside clReleaseMemObject, pfn_free_func), the floor uses the form
 *   memlife must use too: one extra argument, which keeps V8 off the fast call (ffi/deno.ts says why).
 */
import { backend } from "../src/backend.ts";
import type { NativeLibrary, Pointer, SymbolDef } from "../ffi/types.ts";
import { openclCallbacks, openclSymbols } from "../ffi/symbols/opencl.ts";
import type { embreeSymbols } from "../ffi/symbols/embree.ts";

type F = (...args: never[]) => unknown;

export interface RawCalls {
  /** A 64-bit integer argument in the form the fastest call takes (bigint on Deno). */
  wide(n: number): number | bigint;
  clCreateBuffer(
    context: Pointer,
    flags: number | bigint,
    size: number | bigint,
    host: unknown,
    errcode: Int32Array,
  ): Pointer | null;
  clSetMemObjectDestructorCallback(mem: Pointer, fn: unknown, id: number | bigint): number;
  /** For a buffer with no destructor callback: nothing can call back during the call. */
  clReleaseMemObject(mem: Pointer): number;
  /** For a buffer with destructor callbacks, which PoCL runs inside the call. */
  clReleaseMemObjectReentrant(mem: Pointer): number;
  /** NULL is `null`, or `0n` on Deno. */
  clSVMAlloc(context: Pointer, flags: number | bigint, size: number | bigint, alignment: number): RawPointer;
  clSVMFree(context: Pointer, pointer: RawPointer): void;
  /** An SVM pointer's address, for a `BigUint64Array` list. */
  address(pointer: RawPointer): bigint;
  /** `list[index] = address(pointer)`, in the fastest form (Bun: by 32-bit words, no BigInt). */
  store(list: BigUint64Array, index: number, pointer: RawPointer): void;
  /** The event an enqueue wrote into `slot`, in the form `clReleaseEvent` takes. */
  event(slot: BigUint64Array): RawPointer;
  /** With no pfn_free_func. */
  clEnqueueSVMFree(
    q: Pointer,
    n: number,
    list: BigUint64Array,
    fn: null,
    id: number | bigint,
    count: number,
    wait: null,
    event: BigUint64Array,
  ): number;
  /** With a pfn_free_func, which a driver may run inside the call (NVIDIA). */
  clEnqueueSVMFreeReentrant(
    q: Pointer,
    n: number,
    list: BigUint64Array,
    fn: unknown,
    id: number | bigint,
    count: number,
    wait: null,
    event: BigUint64Array,
  ): number;
  /** An event with no callback of its own and no memory object behind it. */
  clReleaseEvent(event: RawPointer): number;
  /** An event whose command may still owe a JS callback. */
  clReleaseEventReentrant(event: RawPointer): number;
}

/** A pointer as the raw floor's SVM and event calls take it: the backend's, or a bigint on Deno. */
export type RawPointer = Pointer | bigint | null;

const names = [
  "clCreateBuffer",
  "clSetMemObjectDestructorCallback",
  "clReleaseMemObject",
  "clSVMAlloc",
  "clSVMFree",
  "clEnqueueSVMFree",
  "clReleaseEvent",
] as const;

const denoTypes: Record<string, string> = {
  void: "void",
  bool: "bool",
  i32: "i32",
  u32: "u32",
  i64: "i64",
  u64: "u64",
  isize: "isize",
  usize: "usize",
  f32: "f32",
  f64: "f64",
  ptr: "pointer",
  buffer: "buffer",
  fn: "function",
};

export function openRaw(path: string): RawCalls {
  const runtime = backend.runtime;
  if (runtime !== "deno") {
    const library = backend.open(path, openclSymbols);
    const s = library.unguarded as unknown as Record<string, F>;
    // Where a JS callback may run inside the call, the form memlife must use too: on Bun and Node,
    // the binding that runs `event` callbacks after the call (ffi/deferred.c), which costs less
    // than one entered inside it.
    const reentrant = library.symbols as unknown as Record<string, F>;
    const calls: Record<string, unknown> = {
      wide: (n: number) => n,
      address: backend.address,
      store: (list: BigUint64Array, index: number, pointer: Pointer | null) =>
        backend.writePointer(list, index, pointer),
      event: (slot: BigUint64Array) => backend.readPointer(slot, 0),
    };
    for (const name of names) calls[name] = s[name];
    calls.clReleaseMemObjectReentrant = reentrant.clReleaseMemObject;
    calls.clEnqueueSVMFreeReentrant = reentrant.clEnqueueSVMFree;
    calls.clReleaseEventReentrant = reentrant.clReleaseEvent;
    return calls as unknown as RawCalls;
  }
  const Deno = (globalThis as unknown as {
    Deno: {
      dlopen(path: string, defs: Record<string, unknown>): { symbols: Record<string, (...args: unknown[]) => unknown> };
    };
  }).Deno;
  const defs: Record<string, unknown> = {};
  for (const name of names) {
    const def: SymbolDef = openclSymbols[name];
    defs[name] = {
      parameters: def.args.map((t) => denoTypes[t]),
      result: denoTypes[def.returns],
      optional: def.optional === true,
    };
  }
  const svm = defs.clSVMAlloc as { result: string };
  svm.result = "u64";
  (defs.clSVMFree as { parameters: string[] }).parameters[1] = "u64";
  (defs.clReleaseEvent as { parameters: string[] }).parameters[0] = "u64";
  const s = Deno.dlopen(path, defs).symbols;
  const release = s.clReleaseMemObject, enqueue = s.clEnqueueSVMFree, releaseEvent = s.clReleaseEvent;
  const x = undefined;
  return {
    wide: (n: number) => BigInt(n),
    clCreateBuffer: s.clCreateBuffer as RawCalls["clCreateBuffer"],
    clSetMemObjectDestructorCallback: s
      .clSetMemObjectDestructorCallback as RawCalls["clSetMemObjectDestructorCallback"],
    clReleaseMemObject: release as RawCalls["clReleaseMemObject"],
    clReleaseMemObjectReentrant: (mem) => release(mem, x) as number,
    clSVMAlloc: s.clSVMAlloc as RawCalls["clSVMAlloc"],
    clSVMFree: s.clSVMFree as RawCalls["clSVMFree"],
    address: (pointer) => pointer as bigint,
    store: (list, index, pointer) => {
      list[index] = pointer as bigint;
    },
    event: (slot) => slot[0],
    clEnqueueSVMFree: enqueue as RawCalls["clEnqueueSVMFree"],
    clEnqueueSVMFreeReentrant: (q, n, list, fn, id, count, wait, event) =>
      enqueue(q, n, list, fn, id, count, wait, event, x) as number,
    clReleaseEvent: releaseEvent as RawCalls["clReleaseEvent"],
    clReleaseEventReentrant: (event) => releaseEvent(event, x) as number,
  };
}

/**
 * The raw floor of a 4 KiB `hostPtr: "use"` buffer awaited until destroyed, one at a time over
 * `host` (bench/parts.ts "raw, own callback", bench/profile.ts use-raw): clCreateBuffer with
 * CL_MEM_USE_HOST_PTR and a destructor callback of the runtime's own, in the native call, that
 * resolves a promise.
 */
export function rawHostPtrLoop(f: RawCalls, context: Pointer, host: ArrayBufferView): (n: number) => Promise<void> {
  const flags = f.wide(1 | 8), size = f.wide(host.byteLength), zero = f.wide(0); // CL_MEM_READ_WRITE | USE_HOST_PTR
  const errcode = new Int32Array(1);
  let gone: (() => void) | undefined;
  // Bun and Node: an `event` slot, which the reentrant release runs after the call (as memlife's,
  // ffi/deferred.c); Deno: the runtime's own callback (see bench/cases.ts `own`).
  const delivery = backend.runtime === "deno" ? "sync" : "event";
  const destructor = backend.callback({ ...openclCallbacks.memDestructor, delivery }, () => {
    gone?.();
    gone = undefined;
  });
  return async (n) => {
    for (let i = 0; i < n; i++) {
      const destroyed = new Promise<void>((resolve) => (gone = resolve));
      const mem = f.clCreateBuffer(context, flags, size, host, errcode)!;
      f.clSetMemObjectDestructorCallback(mem, destructor, zero);
      f.clReleaseMemObjectReentrant(mem);
      await destroyed;
    }
  };
}

/**
 * The raw FFI's calls that give `scene` (of `device`) a triangle mesh, as bench/baseline.c makes
 * them: the raw floor of memlife's `addTriangleMesh` (bench/cases.ts, bench/monitor-swap.ts).
 */
export function rawTriangleMesh(
  e: NativeLibrary<typeof embreeSymbols>["symbols"],
  device: Pointer,
  scene: Pointer,
  { vertices, indices }: { vertices: Float32Array; indices: Uint32Array },
): void {
  const geometry = e.rtcNewGeometry(device, 0); // RTC_GEOMETRY_TYPE_TRIANGLE
  if (geometry === null) throw new Error("rtcNewGeometry returned NULL");
  // RTC_BUFFER_TYPE_VERTEX, slot 0, RTC_FORMAT_FLOAT3, stride 12 / RTC_BUFFER_TYPE_INDEX, RTC_FORMAT_UINT3
  const v = e.rtcSetNewGeometryBuffer(geometry, 1, 0, 0x9003, 12, vertices.length / 3);
  const ix = e.rtcSetNewGeometryBuffer(geometry, 0, 0, 0x5003, 12, indices.length / 3);
  if (v === null || ix === null) throw new Error("rtcSetNewGeometryBuffer returned NULL");
  new Float32Array(backend.arrayBuffer(v, vertices.byteLength)).set(vertices);
  new Uint32Array(backend.arrayBuffer(ix, indices.byteLength)).set(indices);
  e.rtcCommitGeometry(geometry);
  e.rtcAttachGeometry(scene, geometry);
  e.rtcReleaseGeometry(geometry);
}
