/** Embree scenes: triangle meshes, commits off the JS thread, and single-ray queries. */
import type { Pointer } from "../../ffi/types.ts";
import { backend } from "../backend.ts";
import { finalizerState, inRegistry, SafetyNet } from "../callbacks.ts";
import { EmbreeError, ReleasedError } from "../errors.ts";
import { integer, memory, show } from "../check.ts";
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
import type { DeviceState } from "./state.ts";
import type { Device } from "./device.ts";
import { deviceState, liveHandle } from "../internal.ts";

const net = new SafetyNet<{ handle: Pointer; state: DeviceState; refs: number }>(({ handle, state, refs }) => {
  // The references retain() added first (Embree only counts them down), then the last one.
  for (let i = 1; i < refs; i++) embree().symbols.rtcReleaseScene(handle);
  state.release("rtcReleaseScene", handle);
});

const RTC_ERROR_UNKNOWN = 1;
const RTC_ERROR_INVALID_OPERATION = 3;

/** A ray for `intersect1`: origin and direction are 3 numbers each. */
export interface Ray {
  origin: ArrayLike<number>;
  direction: ArrayLike<number>;
  /** Start of the ray segment (default 0). */
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

function vector(value: ArrayLike<number> | undefined, what: string): ArrayLike<number> {
  if (value === null || typeof value !== "object" || value.length !== 3) {
    throw new TypeError(`ray.${what} must be an array of 3 numbers`);
  }
  for (let i = 0; i < 3; i++) {
    if (typeof value[i] !== "number") throw new TypeError(`ray.${what}[${i}] must be a number, got ${show(value[i])}`);
    if (!Number.isFinite(value[i])) {
      throw new RangeError(`ray.${what}[${i}] must be a finite number, got ${show(value[i])}`);
    }
  }
  return value;
}

function optionalNumber(value: number | undefined, fallback: number, what: string): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number") throw new TypeError(`ray.${what} must be a number, got ${show(value)}`);
  if (Number.isNaN(value)) throw new RangeError(`ray.${what} must not be NaN`);
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
  #releaseAfterCommit = false;
  /** Whether the last commit succeeded and nothing was added since. */
  #committed = false;
  readonly device: Device;
  [inRegistry] = false;

  /** @internal use `device.newScene()`. */
  constructor(device: Device, handle: Pointer | null) {
    if (handle === null) throw new EmbreeError("rtcNewScene", RTC_ERROR_UNKNOWN, "returned NULL");
    this.#handle = handle;
    this.device = device;
    this.#deviceHandle = device[liveHandle]();
    this.#state = device[deviceState];
    this.#state.hold();
    net.add(this);
  }

  [finalizerState](): { handle: Pointer; state: DeviceState; refs: number } {
    return { handle: this.#handle!, state: this.#state, refs: this.#refs };
  }

  get alive(): boolean {
    return this.#handle !== null;
  }

  /** @internal */
  [liveHandle](): Pointer {
    if (this.#handle === null) throw new ReleasedError("rtc.Scene");
    return this.#handle;
  }

  /** Whether a commit has succeeded and no geometry was added since: `intersect1` needs it. */
  get committed(): boolean {
    return this.#handle !== null && this.#committed && this.#pending === 0;
  }

  #idle(fn: string): Pointer {
    const handle = this[liveHandle]();
    if (this.#pending > 0) {
      throw new EmbreeError(fn, RTC_ERROR_INVALID_OPERATION, "the scene is being committed: await commit() first");
    }
    return handle;
  }

  /**
   * Adds a triangle mesh: `vertices` holds x, y, z per vertex, `indices` three vertex indices per
   * triangle. Both are copied into Embree's buffers, an allocation the monitor may refuse (then
   * this throws EmbreeError RTC_ERROR_OUT_OF_MEMORY). Returns the geometry ID. Commit to use it.
   */
  addTriangleMesh(vertices: Float32Array, indices: Uint32Array): number {
    const scene = this.#idle("rtcAttachGeometry");
    if (!(vertices instanceof Float32Array)) {
      throw new TypeError(`vertices must be a Float32Array of x, y, z per vertex, got ${show(vertices)}`);
    }
    if (!(indices instanceof Uint32Array)) {
      throw new TypeError(`indices must be a Uint32Array of 3 vertex indices per triangle, got ${show(indices)}`);
    }
    memory(vertices, "vertices", false);
    memory(indices, "indices", false);
    if (vertices.length === 0 || vertices.length % 3 !== 0) {
      throw new RangeError(
        `vertices must hold 3 numbers per vertex and at least one vertex, got ${vertices.length} numbers`,
      );
    }
    if (indices.length === 0 || indices.length % 3 !== 0) {
      throw new RangeError(
        `indices must hold 3 indices per triangle and at least one triangle, got ${indices.length} indices`,
      );
    }
    const vertexCount = vertices.length / 3;
    for (let i = 0; i < indices.length; i++) {
      if (indices[i] >= vertexCount) {
        throw new RangeError(`indices[${i}] is ${indices[i]}, but there are only ${vertexCount} vertices`);
      }
    }
    const s = embree().symbols;
    const state = this.#state;
    const device = this.#deviceHandle;
    const geometry = state.call(
      "rtcNewGeometry",
      () => s.rtcNewGeometry(device, GEOMETRY_TYPE_TRIANGLE) as Pointer | null,
    );
    if (geometry === null) throw new EmbreeError("rtcNewGeometry", RTC_ERROR_UNKNOWN, "returned NULL");
    try {
      const vertexBuffer = state.call(
        "rtcSetNewGeometryBuffer",
        () =>
          s.rtcSetNewGeometryBuffer(geometry, BUFFER_TYPE_VERTEX, 0, FORMAT_FLOAT3, 12, vertexCount) as Pointer | null,
      );
      if (vertexBuffer === null) throw new EmbreeError("rtcSetNewGeometryBuffer", RTC_ERROR_UNKNOWN, "returned NULL");
      new Float32Array(backend.arrayBuffer(vertexBuffer, vertices.byteLength)).set(vertices);
      const indexBuffer = state.call(
        "rtcSetNewGeometryBuffer",
        () =>
          s.rtcSetNewGeometryBuffer(geometry, BUFFER_TYPE_INDEX, 0, FORMAT_UINT3, 12, indices.length / 3) as
            | Pointer
            | null,
      );
      if (indexBuffer === null) throw new EmbreeError("rtcSetNewGeometryBuffer", RTC_ERROR_UNKNOWN, "returned NULL");
      new Uint32Array(backend.arrayBuffer(indexBuffer, indices.byteLength)).set(indices);
      state.call("rtcCommitGeometry", () => s.rtcCommitGeometry(geometry));
      const id = state.call("rtcAttachGeometry", () => s.rtcAttachGeometry(scene, geometry) as number);
      this.#committed = false;
      return id;
    } finally {
      // The scene holds the geometry now; on failure this frees it and its buffers.
      state.call("rtcReleaseGeometry", () => s.rtcReleaseGeometry(geometry));
    }
  }

  /**
   * Builds the scene (rtcCommitScene) off the JS thread, on Embree's TBB workers, which stay free
   * to ask the memory monitor. Commits of one device run one after another. Rejects with an
   * EmbreeError, e.g. RTC_ERROR_OUT_OF_MEMORY when the monitor or the budget refused memory (its
   * `cause` says why).
   */
  async commit(): Promise<void> {
    const handle = this[liveHandle]();
    const state = this.#state;
    this.#pending++;
    try {
      await state.commit("rtcCommitScene", () => embree().async.rtcCommitScene(handle));
      this.#committed = true;
    } catch (error) {
      this.#committed = false;
      throw error;
    } finally {
      if (--this.#pending === 0 && this.#releaseAfterCommit) {
        this.#releaseAfterCommit = false;
        state.release("rtcReleaseScene", handle);
      }
    }
  }

  /**
   * Traces one ray (rtcIntersect1) and returns the closest hit, or null. Needs a committed scene.
   * @example
   * const hit = scene.intersect1({ origin: [0, 0, -5], direction: [0, 0, 1] });
   * if (hit) console.log(hit.distance, hit.primID);
   */
  intersect1(ray: Ray): Hit | null {
    const scene = this.#idle("rtcIntersect1");
    if (ray === null || typeof ray !== "object") {
      throw new TypeError("intersect1 takes a ray { origin, direction, tnear?, tfar? }");
    }
    const origin = vector(ray.origin, "origin");
    const direction = vector(ray.direction, "direction");
    const tnear = optionalNumber(ray.tnear, 0, "tnear");
    const tfar = optionalNumber(ray.tfar, Infinity, "tfar");
    const time = optionalNumber(ray.time, 0, "time");
    // An unsigned int in C: -1 or 2 ** 32 must not wrap into some other mask.
    const mask = ray.mask === undefined ? 0xffffffff : integer(ray.mask, "unsigned", "ray.mask");
    if (!this.#committed) {
      throw new EmbreeError("rtcIntersect1", RTC_ERROR_INVALID_OPERATION, "scene not committed: await commit() first");
    }
    const { rayhit, rayhitView, context } = scratch();
    const f = (at: number, value: number) => rayhit.setFloat32(at, value, true);
    f(0, origin[0]), f(4, origin[1]), f(8, origin[2]), f(12, tnear);
    f(16, direction[0]), f(20, direction[1]), f(24, direction[2]), f(28, time);
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
    embree().symbols.rtcRetainScene(this[liveHandle]());
    this.#refs++;
    net.renew(this);
    return this;
  }

  /**
   * Drops a reference. The last one frees the scene's memory (the monitor sees it, inside this call
   * unless a commit runs somewhere; a commit of this scene in flight finishes first).
   */
  release(): void {
    const handle = this.#handle;
    if (handle === null) return;
    if (--this.#refs > 0) {
      // Not the last reference: Embree only counts down.
      net.renew(this);
      embree().symbols.rtcReleaseScene(handle);
      return;
    }
    this.#handle = null;
    net.remove(this);
    if (this.#pending > 0) this.#releaseAfterCommit = true;
    else this.#state.release("rtcReleaseScene", handle);
  }

  [Symbol.dispose](): void {
    this.release();
  }

  /** The raw RTCScene. Unsafe: invalid after release; Embree calls on it bypass memlife. */
  get unsafeHandle(): Pointer {
    return this[liveHandle]();
  }
}
