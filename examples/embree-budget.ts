/**
 * An Embree device with a memory budget: every allocation Embree makes, on whichever TBB thread,
 * is counted, and those that would go over the budget are refused, so the build fails cleanly
 * instead of taking the machine's memory.
 *
 *   bun embree-budget.ts
 *   deno run --allow-ffi --allow-env embree-budget.ts
 *   node embree-budget.ts                  (Node 22.18 or newer)
 */
import { EmbreeError, rtc } from "memlife";

/** A flat n x n grid of quads, two triangles each. */
function grid(n: number): { vertices: Float32Array; indices: Uint32Array } {
  const vertices = new Float32Array((n + 1) * (n + 1) * 3);
  for (let y = 0; y <= n; y++) {
    for (let x = 0; x <= n; x++) vertices.set([x, y, 0], (y * (n + 1) + x) * 3);
  }
  const indices = new Uint32Array(n * n * 6);
  for (let y = 0; y < n; y++) {
    for (let x = 0; x < n; x++) {
      const v = y * (n + 1) + x;
      indices.set([v, v + 1, v + n + 1, v + 1, v + n + 2, v + n + 1], (y * n + x) * 6);
    }
  }
  return { vertices, indices };
}

const device = rtc.newDevice("", { accounting: true }); // count from the device's first byte
device.setMemoryBudget(8 << 20); // 8 MiB

const small = device.newScene();
const a = grid(32); // 2k triangles: well under the budget
small.addTriangleMesh(a.vertices, a.indices);
await small.commit();
console.log(`2k triangles built; the device holds ${device.memory.bytes} bytes`);

const large = device.newScene();
let refused = "";
try {
  const b = grid(300); // 180k triangles: the mesh fits in the budget, its BVH does not
  large.addTriangleMesh(b.vertices, b.indices); // a larger mesh is refused here already (Embree copies it)
  await large.commit(); // the build allocates on TBB workers; with no JS monitor, memlife answers them in C there
} catch (error) {
  if (!(error instanceof EmbreeError) || error.codeName !== "RTC_ERROR_OUT_OF_MEMORY") throw error;
  refused = error.fn;
}
console.log(`180k triangles refused in ${refused}; ${device.memory.denied} allocation(s) denied`);

large.release();
small.release();
device.release();
console.log(`after every release the device holds ${device.memory.bytes} bytes`);
if (refused === "" || device.memory.bytes !== 0) throw new Error("unexpected budget outcome");
