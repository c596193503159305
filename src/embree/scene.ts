/** Embree scenes: triangle meshes, commits off the JS thread, and single-ray queries. */
import type { Pointer } from "../../ffi/types.ts";
import { backend } from "../backend.ts";
import { finalizerState, reportCallbackError, SafetyNet } from "../callbacks.ts";
import { EmbreeError, ReleasedError } from "../errors.ts";
import { integer, ownView, show, viewBuffer } from "../check.ts";
import { isShared } from "../../ffi/views.ts";
import {
  BUFFER_TYPE_INDEX,
  BUFFER_TYPE_VERTEX,
  embree,
  embreeMajor,
  FORMAT_FLOAT3,
  FORMAT_UINT3,
  GEOMETRY_TYPE_TRIANGLE,
  INVALID_GEOMETRY_ID,
} from "./native.ts";
import { debts, type DeviceState, settleDebts, wrapperRoom } from "./state.ts";
import type { Device } from "./device.ts";
import { closeStatics, fromFactory, notByNew } from "../internal.ts";
import { commitOnWorkerThread } from "../worker.ts";

const net = new SafetyNet<{ handle: Pointer; state: DeviceState; refs: number }, Scene>(({ handle, state, refs }) => {
  // The references retain() added first (Embree only counts them down), then the last one.
  for (let i = 1; i < refs; i++) embree().symbols.rtcReleaseScene(handle);
  state.releaseScene(handle);
}, (scene) => Scene[finalizerState](scene));

const RTC_ERROR_UNKNOWN = 1;
const RTC_ERROR_INVALID_OPERATION = 3;

/**
 * A ray for `intersect1`: origin and direction are 3 numbers each, within ±1.844e18 (Embree's
 * limit for a valid ray; a RangeError past it).
 */
export interface Ray {
  origin: ArrayLike<number>;
  direction: ArrayLike<number>;
  /** Start of the ray segment, 0 or more (default 0). */
  tnear?: number;
  /** End of the ray segment (default Infinity). */
  tfar?: number;
  /** Motion-blur time in [0, 1] (default 0). */
  time?: number;
  /** Ray mask (default 0xffffffff). */
  mask?: number;
}

export interface Hit {
  /** Distance along the ray to the hit, in units of the direction's length (RTCRay.tfar). */
  distance: number;
  geomID: number;
  primID: number;
  /** Barycentric coordinates of the hit in the triangle. */
  u: number;
  v: number;
  /** The geometric normal as Embree returns it: not normalised, facing by vertex order. */
  normal: [number, number, number];
}

/**
 * struct RTCRayHit (16-byte aligned: 48 bytes of ray, then the hit, 48 bytes with Embree 4's
 * instPrimID) and, for Embree 3, struct RTCIntersectContext after it. One per process: intersect1
 * is synchronous.
 */
let rayScratch: { rayhit: DataView; rayhitView: Uint8Array; context: Uint8Array } | undefined;
function scratch(): NonNullable<typeof rayScratch> {
  if (rayScratch !== undefined) return rayScratch;
  const memory = new ArrayBuffer(256);
  const misalign = Number(backend.address(backend.pointerOf(new Uint8Array(memory))) % 16n);
  const at = misalign === 0 ? 0 : 16 - misalign;
  const rayhitView = new Uint8Array(memory, at, 96);
  const contextView = new Uint8Array(memory, at + 128, 24);
  // rtcInitIntersectContext: flags 0 (incoherent), no filter, instID[0] = RTC_INVALID_GEOMETRY_ID.
  new DataView(memory, at + 128, 24).setUint32(16, INVALID_GEOMETRY_ID, true);
  rayScratch = { rayhit: new DataView(memory, at, 96), rayhitView, context: contextView };
  return rayScratch;
}

/**
 * Embree's bound on a coordinate of a ray's origin and direction, as a float (FLT_LARGE): past it,
 * or infinite once rounded to a float (1e39), Embree 3.13 asserts `ray.valid()` and aborts.
 */
const RAY_LIMIT = Math.fround(1.844e18);

/** Origin or direction: an array-like of 3 numbers. */
function vector(value: unknown, what: string): ArrayLike<unknown> {
  if (value === null || typeof value !== "object" || (value as ArrayLike<unknown>).length !== 3) {
    throw new TypeError(`ray.${what} must be an array of 3 numbers`);
  }
  return value as ArrayLike<unknown>;
}

/** The smallest normal float: below it, a float is subnormal. */
const FLOAT_MIN_NORMAL = 2 ** -126;

/**
 * Element `i` of an origin or direction, read once (a getter may say something else the second
 * time). A coordinate that is subnormal as a float is 0, as Embree's documentation asks of the
 * threads that trace (denormals are zero): a direction of [0, 0, 1e-39] made Embree report a hit
 * at distance NaN, where [0, 0, 0] misses.
 */
function coordinate(vector: ArrayLike<unknown>, i: number, what: string): number {
  const x = vector[i];
  if (typeof x !== "number") throw new TypeError(`ray.${what}[${i}] must be a number, got ${show(x)}`);
  const magnitude = Math.abs(Math.fround(x));
  if (!(magnitude <= RAY_LIMIT)) {
    throw new RangeError(`ray.${what}[${i}] must be a number within ±1.844e18 (Embree's limit), got ${show(x)}`);
  }
  return magnitude < FLOAT_MIN_NORMAL ? 0 : x;
}

/** An optional float of the ray, within [min, max]; NaN never is. */
function optionalNumber(value: unknown, fallback: number, what: string, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number") throw new TypeError(`ray.${what} must be a number, got ${show(value)}`);
  if (!(value >= min && value <= max)) {
    throw new RangeError(`ray.${what} must be a number in [${min}, ${max}], got ${show(value)}`);
  }
  return value;
}

/**
 * A scene (rtcNewScene). Geometry is copied into buffers Embree allocates (rtcSetNewGeometryBuffer),
 * so the monitor sees that memory too and the JS arrays are free to reuse at once.
 * @example
 * import { rtc } from "memlife";
 * using device = rtc.newDevice();
 * using scene = device.newScene();
 * scene.addTriangleMesh(new Float32Array([0,0,0, 1,0,0, 0,1,0]), new Uint32Array([0, 1, 2]));
 * await scene.commit();
 * scene.intersect1({ origin: [0.2, 0.2, -1], direction: [0, 0, 1] }); // { distance: 1, primID: 0, ... }
 */
export class Scene {
  #handle: Pointer | null;
  #refs = 1;
  /** The RTCDevice: valid while this scene is, even after the Device was released (the scene holds it). */
  readonly #deviceHandle: Pointer;
  readonly #state: DeviceState;
  /** Commits started and not settled: the scene must not change, and the native release waits for them. */
  #pending = 0;
  /**
   * An addTriangleMesh runs: the monitor it calls must not use the scene either, and a release()
   * there waits for the call to return.
   */
  #adding = false;
  /** The handle whose native release waits for the scene to be idle (see `#releaseIfIdle`). */
  #releaseWhenIdle: Pointer | null = null;
  /** Whether the last commit succeeded and nothing was added since. */
  #committed = false;
  readonly device: Device;

  /**
   * @internal use `device.newScene()`, which gives the device's handle and state from its private
   * fields (members of the device object could lie).
   */
  constructor(
    made: typeof fromFactory,
    device: Device,
    deviceHandle: Pointer,
    state: DeviceState,
  ) {
    // Only newScene's: a program's `new rtc.Scene(device)` made a scene over an undefined handle
    // (Bun and Node crashed in C, Deno leaked the device's reference).
    if (made !== fromFactory) notByNew("rtc.Scene", "device.newScene()");
    this.device = device;
    this.#deviceHandle = deviceHandle;
    this.#state = state;
    // The object first, the native scene last: at the edge of the stack, a RangeError after
    // rtcNewScene (in the bookkeeping around it) lost the scene, and its device, for good.
    state.made = null;
    try {
      this.#handle = state.newScene();
    } catch (error) {
      // `made`: the native scene exists (the RangeError came after it). It is this scene's, and
      // the program gets it: a scene it never received could only be freed by the garbage collector.
      const handle = state.made;
      if (handle === null) throw error;
      this.#handle = handle;
    }
    try {
      net.add(this);
    } catch {
      // The edge of the stack: the scene stays without its safety net, for the program to release.
    }
  }

  /** @internal What the safety net registers (see `finalizerState`). */
  static [finalizerState](scene: Scene): { handle: Pointer; state: DeviceState; refs: number } | undefined {
    if (scene.#handle === null) return undefined;
    return { handle: scene.#handle, state: scene.#state, refs: scene.#refs };
  }

  get alive(): boolean {
    return this.#handle !== null;
  }

  /** @internal */
  #live(): Pointer {
    if (this.#handle === null) throw new ReleasedError("rtc.Scene");
    return this.#handle;
  }

  /** Whether a commit has succeeded and no geometry was added since: `intersect1` needs it. */
  get committed(): boolean {
    return this.#handle !== null && this.#committed && this.#pending === 0;
  }

  /** The handle, for a call that needs the scene not committing and not inside its own addTriangleMesh. */
  #idle(fn: string): Pointer {
    const handle = this.#live();
    if (this.#pending > 0) {
      throw new EmbreeError(fn, RTC_ERROR_INVALID_OPERATION, "the scene is being committed: await commit() first");
    }
    this.#notAdding(fn);
    return handle;
  }

  #notAdding(fn: string): void {
    if (this.#adding) {
      throw new EmbreeError(
        fn,
        RTC_ERROR_INVALID_OPERATION,
        "addTriangleMesh is adding to the scene (its monitor runs now)",
      );
    }
  }

  /**
   * The native release `release()` asked for, once no commit or add of the scene runs. Until the
   * state took the handle (`releasing`), the release stays owed: at the edge of the stack a
   * RangeError before that leaves `#releaseWhenIdle` set, and the next `release()` (or the end of
   * the commit or add) makes it.
   */
  #releaseIfIdle(): void {
    const handle = this.#releaseWhenIdle;
    if (handle === null || this.#pending > 0 || this.#adding) return;
    const state = this.#state;
    // Cleared first, given back if the state never took the handle: a store that the edge of the
    // stack stopped after the native release must leave a leak, never a second release.
    this.#releaseWhenIdle = null;
    state.releasing = null;
    try {
      state.releaseScene(handle);
    } catch (error) {
      if (state.releasing !== handle) {
        this.#releaseWhenIdle = handle; // not taken: still owed
        throw error;
      }
      // The program's release() returned long ago: the commit or add that ends here is not its caller.
      reportCallbackError(error, "release");
    }
  }

  /**
   * Adds a triangle mesh: `vertices` holds x, y, z per vertex, `indices` three vertex indices per
   * triangle. Both are copied into Embree's buffers, an allocation the monitor may refuse (then
   * this throws EmbreeError RTC_ERROR_OUT_OF_MEMORY). Returns the geometry ID. Commit to use it.
   */
  addTriangleMesh(vertices: Float32Array, indices: Uint32Array): number {
    let v = ownView(vertices, Float32Array, "Float32Array", "vertices (x, y, z per vertex)");
    let ix = ownView(indices, Uint32Array, "Uint32Array", "indices (3 vertex indices per triangle)");
    if (v.length === 0 || v.length % 3 !== 0) {
      throw new RangeError(`vertices must hold 3 numbers per vertex and at least one vertex, got ${v.length} numbers`);
    }
    if (ix.length === 0 || ix.length % 3 !== 0) {
      throw new RangeError(
        `indices must hold 3 indices per triangle and at least one triangle, got ${ix.length} indices`,
      );
    }
    const state = this.#state;
    // A JS monitor runs inside the native calls below, before the copy: it could rewrite an index
    // after the check, or detach the arrays. Then the checks and the copy use memlife's own copies.
    if (state.monitor !== null) {
      v = new Float32Array(v);
      ix = new Uint32Array(ix);
    } else if (isShared(viewBuffer(ix))) {
      // Another thread may rewrite shared indices between the check and the copy: an index checked
      // valid reached Embree wild (it dropped the triangle) in about 1 of 400 tries.
      ix = new Uint32Array(ix);
    }
    const vertexCount = v.length / 3;
    for (let i = 0; i < ix.length; i++) {
      if (ix[i] >= vertexCount) {
        throw new RangeError(`indices[${i}] is ${ix[i]}, but there are only ${vertexCount} vertices`);
      }
    }
    const scene = this.#idle("rtcAttachGeometry");
    const s = embree().symbols;
    const device = this.#deviceHandle;
    this.#adding = true;
    try {
      return state.calls((step, check) => {
        // rtcNewGeometry and rtcReleaseGeometry are called here, not through `step`: at the edge of
        // the stack a call between rtcNewGeometry and the `finally` (step's own frame) lost the
        // geometry, and its buffers and device reference, for good. Room for the release's wrapper
        // (Deno) is made before the geometry: the `finally` runs at this frame's depth.
        wrapperRoom();
        let geometry: Pointer | null = null;
        let done = false;
        try {
          geometry = s.rtcNewGeometry(device, GEOMETRY_TYPE_TRIANGLE) as Pointer | null;
          check("rtcNewGeometry");
          if (geometry === null) throw new EmbreeError("rtcNewGeometry", RTC_ERROR_UNKNOWN, "returned NULL");
          const made = geometry;
          const vertexBuffer = step(
            "rtcSetNewGeometryBuffer",
            () =>
              s.rtcSetNewGeometryBuffer(made, BUFFER_TYPE_VERTEX, 0, FORMAT_FLOAT3, 12, vertexCount) as
                | Pointer
                | null,
          );
          if (vertexBuffer === null) {
            throw new EmbreeError("rtcSetNewGeometryBuffer", RTC_ERROR_UNKNOWN, "returned NULL");
          }
          new Float32Array(backend.arrayBuffer(vertexBuffer, v.byteLength)).set(v);
          const indexBuffer = step(
            "rtcSetNewGeometryBuffer",
            () =>
              s.rtcSetNewGeometryBuffer(made, BUFFER_TYPE_INDEX, 0, FORMAT_UINT3, 12, ix.length / 3) as
                | Pointer
                | null,
          );
          if (indexBuffer === null) {
            throw new EmbreeError("rtcSetNewGeometryBuffer", RTC_ERROR_UNKNOWN, "returned NULL");
          }
          new Uint32Array(backend.arrayBuffer(indexBuffer, ix.byteLength)).set(ix);
          step("rtcCommitGeometry", () => s.rtcCommitGeometry(made));
          const id = step("rtcAttachGeometry", () => s.rtcAttachGeometry(scene, made) as number);
          this.#committed = false;
          done = true;
          return id;
        } finally {
          // The scene holds the geometry now; on failure this frees it and its buffers. Part of the
          // same operation: the monitor that refused an allocation may throw again for these frees.
          if (geometry !== null) {
            s.rtcReleaseGeometry(geometry);
            // Its error only when nothing failed before (then that error is on its way).
            if (done) check("rtcReleaseGeometry");
          }
        }
      });
    } finally {
      this.#adding = false;
      this.#releaseIfIdle();
    }
  }

  /**
   * Builds the scene (rtcCommitScene) off the JS thread, on Embree's TBB workers, which stay free
   * to ask the memory monitor. Commits of one device run one after another. Rejects with an
   * EmbreeError, e.g. RTC_ERROR_OUT_OF_MEMORY when the monitor or the budget refused memory (its
   * `cause` says why).
   */
  async commit(): Promise<void> {
    const handle = this.#live();
    this.#notAdding("rtcCommitScene");
    this.#pending++;
    try {
      // A Deno Worker's device without accounting: on the Worker's thread (see commitOnWorkerThread).
      const here = commitOnWorkerThread && !this.#state.accounting;
      await this.#state.commit(
        "rtcCommitScene",
        () => here ? Promise.resolve(embree().symbols.rtcCommitScene(handle)) : embree().async.rtcCommitScene(handle),
      );
      this.#committed = true;
    } catch (error) {
      this.#committed = false;
      throw error;
    } finally {
      this.#pending--;
      this.#releaseIfIdle();
    }
  }

  /**
   * Traces one ray (rtcIntersect1) and returns the closest hit, or null. Needs a committed scene.
   * @example
   * const hit = scene.intersect1({ origin: [0, 0, -5], direction: [0, 0, 1] });
   * if (hit) console.log(hit.distance, hit.primID);
   */
  intersect1(ray: Ray): Hit | null {
    if (ray === null || typeof ray !== "object") {
      throw new TypeError("intersect1 takes a ray { origin, direction, tnear?, tfar? }");
    }
    // Each field is read once, and before the scene's handle is taken: a getter may call memlife,
    // even release this scene. Embree asserts (and aborts) on tnear < 0 and on a time outside [0, 1].
    const origin = vector(ray.origin, "origin");
    const ox = coordinate(origin, 0, "origin");
    const oy = coordinate(origin, 1, "origin");
    const oz = coordinate(origin, 2, "origin");
    const direction = vector(ray.direction, "direction");
    const dx = coordinate(direction, 0, "direction");
    const dy = coordinate(direction, 1, "direction");
    const dz = coordinate(direction, 2, "direction");
    // The optional fields: the ray's own or its class's, never one a patched Object.prototype lends
    // every object (Object.prototype.tfar = 0.5 had every ray miss). Written out per key, as
    // `plainObject` (check.ts) says why; `in` is an inline-cached lookup on the hot path.
    const tnear = optionalNumber(
      "tnear" in ray && (!("tnear" in Object.prototype) || Object.hasOwn(ray, "tnear")) ? ray.tnear : undefined,
      0,
      "tnear",
      0,
      Infinity,
    );
    const tfar = optionalNumber(
      "tfar" in ray && (!("tfar" in Object.prototype) || Object.hasOwn(ray, "tfar")) ? ray.tfar : undefined,
      Infinity,
      "tfar",
      -Infinity,
      Infinity,
    );
    const time = optionalNumber(
      "time" in ray && (!("time" in Object.prototype) || Object.hasOwn(ray, "time")) ? ray.time : undefined,
      0,
      "time",
      0,
      1,
    );
    // An unsigned int in C: -1 or 2 ** 32 must not wrap into some other mask.
    const rawMask = "mask" in ray && (!("mask" in Object.prototype) || Object.hasOwn(ray, "mask"))
      ? ray.mask
      : undefined;
    const mask = rawMask === undefined ? 0xffffffff : integer(rawMask, "unsigned", "ray.mask");
    const scene = this.#idle("rtcIntersect1");
    if (!this.#committed) {
      throw new EmbreeError("rtcIntersect1", RTC_ERROR_INVALID_OPERATION, "scene not committed: await commit() first");
    }
    const { rayhit, rayhitView, context } = scratch();
    const f = (at: number, value: number) => rayhit.setFloat32(at, value, true);
    f(0, ox), f(4, oy), f(8, oz), f(12, tnear);
    f(16, dx), f(20, dy), f(24, dz), f(28, time);
    f(32, tfar);
    rayhit.setUint32(36, mask, true);
    rayhit.setUint32(40, 0, true); // id
    rayhit.setUint32(44, 0, true); // flags
    rayhit.setUint32(72, INVALID_GEOMETRY_ID, true); // hit.geomID
    rayhit.setUint32(76, INVALID_GEOMETRY_ID, true); // hit.instID[0]
    rayhit.setUint32(80, INVALID_GEOMETRY_ID, true); // hit.instPrimID[0] (Embree 4)
    const s = embree().symbols;
    // Embree 3: (scene, context, rayhit); Embree 4: (scene, rayhit, arguments or NULL).
    if (embreeMajor() >= 4) this.#state.call("rtcIntersect1", () => s.rtcIntersect1(scene, rayhitView, null));
    else this.#state.call("rtcIntersect1", () => s.rtcIntersect1(scene, context, rayhitView));
    const geomID = rayhit.getUint32(72, true);
    if (geomID === INVALID_GEOMETRY_ID) return null;
    const g = (at: number) => rayhit.getFloat32(at, true);
    return {
      distance: g(32),
      geomID,
      primID: rayhit.getUint32(68, true),
      u: g(60),
      v: g(64),
      normal: [g(48), g(52), g(56)],
    };
  }

  /** Adds a reference (rtcRetainScene); each `retain()` needs its own `release()`. */
  retain(): this {
    embree().symbols.rtcRetainScene(this.#live());
    this.#refs++;
    net.renew(this);
    return this;
  }

  /**
   * Drops a reference. The last one frees the scene's memory (the monitor sees it, inside this call
   * unless a commit runs somewhere; a commit of this scene in flight, or the addTriangleMesh whose
   * monitor calls this, finishes first).
   */
  release(): void {
    if (debts.owed) settleDebts();
    const handle = this.#handle;
    if (handle === null) {
      // A release the edge of the stack left owed (see #releaseIfIdle) is made now.
      if (this.#releaseWhenIdle !== null) this.#releaseIfIdle();
      return;
    }
    const refs = this.#refs;
    if (refs > 1) {
      // Not the last reference: Embree only counts down, with no callback (so nothing throws once
      // the native call ran). What throws before it leaves the count as it was; a net that took
      // the lower count meanwhile releases less than it could, never more.
      const release = embree().symbols.rtcReleaseScene;
      this.#refs = refs - 1;
      try {
        net.renew(this);
        release(handle);
      } catch (error) {
        this.#refs = refs;
        throw error;
      }
      return;
    }
    net.remove(this); // first: what throws must leave the scene as it was
    this.#handle = null;
    this.#releaseWhenIdle = handle;
    this.#releaseIfIdle();
  }

  [Symbol.dispose](): void {
    this.release();
  }

  /** The raw RTCScene. Unsafe: invalid after release; Embree calls on it bypass memlife. */
  get unsafeHandle(): Pointer {
    return this.#live();
  }

  static {
    closeStatics(this);
  }
}
