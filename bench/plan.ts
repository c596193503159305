/**
 * The benchmark cases, as data shared by the driver (bench/main.ts: progress, table order, targets)
 * and the runtime processes (bench/cases.ts). bench/baseline.c and bench/pyopencl_cases.py use the
 * same case names, spelled out there.
 */

export type Group = "opencl" | "embree";

export interface CaseSpec {
  readonly name: string;
  readonly group: Group;
  /** What the rows of this case are compared with; see `targets` in bench/report.ts. */
  readonly kind: "create" | "callbacks" | "await" | "svm" | "pipeline" | "embree";
  /** Buffer size or SVM size in bytes (OpenCL cases). */
  readonly bytes?: number;
  /** Destructor callbacks per buffer. */
  readonly callbacks?: number;
  /** Triangles per build (Embree cases). */
  readonly triangles?: number;
  /** Embree: which monitor the device has. */
  readonly monitor?: "none" | "js" | "budget";
  /** The implementations each JS runtime measures, besides the C baseline and PyOpenCL. */
  readonly impls: readonly string[];
  /** Whether PyOpenCL can do the same thing (it has no destructor or SVM-free callbacks). */
  readonly pyopencl: boolean;
}

const raw = ["raw", "memlife"] as const;

export const openclCases: readonly CaseSpec[] = [
  { name: "buffer 64 B", group: "opencl", kind: "create", bytes: 64, callbacks: 0, impls: raw, pyopencl: true },
  { name: "buffer 4 KiB", group: "opencl", kind: "create", bytes: 4096, callbacks: 0, impls: raw, pyopencl: true },
  { name: "buffer 1 MiB", group: "opencl", kind: "create", bytes: 1 << 20, callbacks: 0, impls: raw, pyopencl: true },
  { name: "buffer 16 MiB", group: "opencl", kind: "create", bytes: 16 << 20, callbacks: 0, impls: raw, pyopencl: true },
  {
    name: "buffer 4 KiB +1 destructor",
    group: "opencl",
    kind: "callbacks",
    bytes: 4096,
    callbacks: 1,
    impls: raw,
    pyopencl: false,
  },
  {
    name: "buffer 4 KiB +4 destructors",
    group: "opencl",
    kind: "callbacks",
    bytes: 4096,
    callbacks: 4,
    impls: raw,
    pyopencl: false,
  },
  {
    name: "buffer 4 KiB await destroyed",
    group: "opencl",
    kind: "await",
    bytes: 4096,
    callbacks: 0,
    impls: raw,
    pyopencl: false,
  },
  {
    name: "buffer 4 KiB hostPtr use",
    group: "opencl",
    kind: "await",
    bytes: 4096,
    callbacks: 0,
    impls: raw,
    pyopencl: true,
  },
  { name: "svm 4 KiB enqueueSVMFree", group: "opencl", kind: "svm", bytes: 4096, impls: raw, pyopencl: true },
  { name: "svm 4 KiB enqueueSVMFree+onFree", group: "opencl", kind: "svm", bytes: 4096, impls: raw, pyopencl: false },
  { name: "svm 4 KiB release", group: "opencl", kind: "svm", bytes: 4096, impls: raw, pyopencl: true },
  // Per iteration: a buffer (with a destructor callback) and an SVM allocation, a write into the
  // buffer, a kernel reading it into the SVM allocation, a read back awaited, the SVM freed with
  // enqueueSVMFree and the buffer released. PyOpenCL does the same minus the destructor callback.
  { name: "pipeline 4 KiB", group: "opencl", kind: "pipeline", bytes: 4096, impls: raw, pyopencl: true },
];

/** The kernel of the pipeline case, the same source in every implementation. */
export const pipelineKernel = "__kernel void pipeline(__global const int *in, __global int *out, int k) " +
  "{ size_t i = get_global_id(0); out[i] = in[i] * k + 1; }";

/** "10k", "1M": how case names spell a triangle count. */
export function triangleLabel(n: number): string {
  return n % 1_000_000 === 0 ? `${n / 1_000_000}M` : `${n / 1000}k`;
}

export function embreeCases(triangles: readonly number[]): CaseSpec[] {
  return triangles.flatMap((n) =>
    [
      // "raw sync": rtcCommitScene called directly on the JS thread, only possible with no JS monitor
      // (one called from TBB workers while the JS thread blocks would deadlock). "raw" goes through
      // the backend's async binding, like memlife's commit().
      {
        name: `embree ${triangleLabel(n)} tri`,
        group: "embree",
        kind: "embree",
        triangles: n,
        monitor: "none",
        impls: ["raw sync", "raw", "memlife"],
        pyopencl: false,
      },
      {
        name: `embree ${triangleLabel(n)} tri +monitor`,
        group: "embree",
        kind: "embree",
        triangles: n,
        monitor: "js",
        impls: raw,
        pyopencl: false,
      },
      {
        name: `embree ${triangleLabel(n)} tri +budget`,
        group: "embree",
        kind: "embree",
        triangles: n,
        monitor: "budget",
        impls: raw,
        pyopencl: false,
      },
    ] satisfies CaseSpec[]
  );
}

/** Triangle counts of each set. */
export const triangleSets = {
  quick: [10_000, 100_000],
  default: [10_000, 100_000, 1_000_000],
  full: [10_000, 100_000, 1_000_000, 2_000_000],
} as const;

/** Sampling of each set: the same for every process of a run. */
export const methods = {
  quick: { sampleMs: 20, warmupMs: 30, samples: 3 },
  default: { sampleMs: 50, warmupMs: 100, samples: 5 },
  full: { sampleMs: 100, warmupMs: 200, samples: 7 },
} as const;

/** The budget of the "+budget" cases: far above what the largest scene needs, so nothing is refused. */
export const budgetBytes = 1 << 30;

export function matches(spec: CaseSpec, filter: string | undefined): boolean {
  return filter === undefined || spec.name.toLowerCase().includes(filter.toLowerCase());
}

/** The mesh bench/baseline.c builds: a grid of quads, two triangles each, with a bumpy height. */
export function mesh(triangleCount: number): { vertices: Float32Array; indices: Uint32Array } {
  const cells = Math.ceil(triangleCount / 2);
  const cols = Math.ceil(Math.sqrt(cells));
  const rows = Math.ceil(cells / cols);
  const vertices = new Float32Array(3 * (cols + 1) * (rows + 1));
  for (let y = 0; y <= rows; y++) {
    for (let x = 0; x <= cols; x++) {
      const p = 3 * (y * (cols + 1) + x);
      vertices[p] = x;
      vertices[p + 1] = y;
      vertices[p + 2] = ((x * 7 + y * 13) % 17) / 17;
    }
  }
  const indices = new Uint32Array(3 * triangleCount);
  for (let t = 0; t < triangleCount; t++) {
    const cell = t >> 1;
    const x = cell % cols;
    const y = Math.floor(cell / cols);
    const a = y * (cols + 1) + x;
    const c = a + cols + 1;
    indices.set(t % 2 === 0 ? [a, a + 1, c] : [a + 1, c + 1, c], 3 * t);
  }
  return { vertices, indices };
}
