/**
 * memlife's JS-monitored Embree commit against the raw FFI's, one build of each in turn in one
 * process, with parts of memlife swapped for the raw FFI's one at a time, to find which part
 * makes the difference (the bench's "embree 10k tri +monitor" row, memlife ÷ raw):
 *
 *   node bench/monitor-swap.ts [--builds=300] [--triangles=10000] [--swap=monitor,commit,release,device,mesh]
 *     [--spin=µs] [--raw-first]          (Bun and Deno run it too)
 *
 *   --swap=monitor   memlife's device gets the raw FFI's monitor callback instead of memlife's
 *                    (its native ledger, the relay callback, `onMonitor`, `ledger_apply`)
 *   --swap=commit    memlife's scene is committed by the raw FFI's async call, not `scene.commit()`
 *                    (its commit chain, operation and promise plumbing)
 *   --swap=release   memlife's scene is freed off the JS thread after its commit, as the raw FFI's
 *                    (retained natively, released by memlife, then by the raw FFI's async call)
 *   --swap=device    the raw FFI's scenes are made on a second memlife device, with memlife's monitor
 *   --swap=mesh      memlife's scene gets its mesh through the raw FFI's calls, not `addTriangleMesh`
 *   --spin=µs        the JS thread busy-waits this long before each raw FFI commit: how much the
 *                    JS thread's work just before a commit costs the commit
 *   --raw-first      the raw FFI's build first in each turn
 *
 * Prints the median commit time of each and their ratio, and the JS thread's busy time during a
 * commit (event loop utilization; Node only). Stop 36 (2-vCPU VM, 10k triangles): on Node memlife
 * took 1.07-1.18× the raw FFI's time with nothing swapped, 1.06-1.09× with any one swap, and
 * 1.03-1.07× with all five (memlife's side is then memlife's device and `newScene()` around the raw
 * FFI's calls, and the raw FFI's scenes are watched by memlife's monitor); a spin of 30-120 µs
 * before the raw FFI's commits left the gap as it was. Bun 1.15×; Deno 0.28× (its own thread-safe
 * callback is what memlife's ticket replaces). No one layer of memlife's explains Node's gap.
 */
import process from "node:process";
import { performance } from "node:perf_hooks";
import { rtc } from "../src/mod.ts";
import { backend } from "../src/backend.ts";
import { finalizerState } from "../src/callbacks.ts";
import { embree } from "../src/embree/native.ts";
import { embreeCallbacks } from "../ffi/symbols/embree.ts";
import type { Pointer } from "../ffi/types.ts";
import { mesh } from "./plan.ts";
import { rawTriangleMesh } from "./raw.ts";

const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const builds = Number(arg("builds") ?? 300);
const triangles = Number(arg("triangles") ?? 10_000);
const swaps = new Set((arg("swap") ?? "").split(",").filter((s) => s !== ""));
for (const s of swaps) {
  if (!["monitor", "commit", "release", "device", "mesh"].includes(s)) throw new Error(`unknown --swap=${s}`);
}
const spinUs = Number(arg("spin") ?? 0);
const rawFirst = process.argv.includes("--raw-first");

const { vertices, indices } = mesh(triangles);
const handleOf = (o: object) =>
  (o.constructor as unknown as Record<symbol, (x: object) => { handle: Pointer }>)[finalizerState](o).handle;

const watched = rtc.newDevice("");
watched.setMemoryMonitorFunction(() => true);
// The library memlife opened (EMBREE_LIBRARY, else Embree 4, else 3), its bindings called directly.
const lib = embree();
const e = lib.symbols;
const rawMonitor = backend.callback(embreeCallbacks.memoryMonitor, () => true);
const second = rtc.newDevice("");
second.setMemoryMonitorFunction(() => true);
const rawDevice = swaps.has("device") ? handleOf(second) : e.rtcNewDevice("");
if (rawDevice === null) throw new Error("rtcNewDevice returned NULL");
if (!swaps.has("device")) e.rtcSetDeviceMemoryMonitorFunction(rawDevice, rawMonitor, 1);
if (swaps.has("monitor")) e.rtcSetDeviceMemoryMonitorFunction(handleOf(watched), rawMonitor, 1);

// Bun and Deno have the function but answer 0.
const onNode = !("Bun" in globalThis) && !("Deno" in globalThis);
const elu = onNode ? performance.eventLoopUtilization : undefined;
const times = { memlife: [] as number[], raw: [] as number[] };
const busy = { memlife: [] as number[], raw: [] as number[] };

async function timedCommit(which: "memlife" | "raw", commit: () => Promise<unknown>): Promise<void> {
  const start = performance.now();
  const before = elu?.call(performance);
  await commit();
  times[which].push(performance.now() - start);
  if (before !== undefined) busy[which].push(elu!.call(performance, before).active);
}

async function memlifeBuild(): Promise<void> {
  const scene = watched.newScene();
  const handle = handleOf(scene);
  if (swaps.has("mesh")) rawTriangleMesh(e, handleOf(watched), handle, { vertices, indices });
  else scene.addTriangleMesh(vertices, indices);
  await timedCommit("memlife", () => swaps.has("commit") ? lib.async.rtcCommitScene(handle) : scene.commit());
  if (swaps.has("release")) {
    e.rtcRetainScene(handle);
    scene.release();
    await lib.async.rtcReleaseScene(handle);
  } else {
    scene.release();
  }
}

async function rawBuild(): Promise<void> {
  const scene = e.rtcNewScene(rawDevice);
  if (scene === null) throw new Error("rtcNewScene returned NULL");
  rawTriangleMesh(e, rawDevice, scene, { vertices, indices });
  if (spinUs > 0) {
    const until = performance.now() + spinUs / 1000;
    while (performance.now() < until);
  }
  await timedCommit("raw", () => lib.async.rtcCommitScene(scene));
  await lib.async.rtcReleaseScene(scene);
}

const turn = rawFirst ? [rawBuild, memlifeBuild] : [memlifeBuild, rawBuild];
for (let i = 0; i < builds + 20; i++) {
  if (i === 20) { for (const list of [...Object.values(times), ...Object.values(busy)]) list.length = 0; }
  for (const build of turn) await build();
}
const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1] * 1000;
const [m, r] = [median(times.memlife), median(times.raw)];
console.log(
  `${triangles} triangles, ${builds} builds each, swapped: ${[...swaps].join(", ") || "nothing"}${
    spinUs > 0 ? `, raw FFI after a ${spinUs} µs spin` : ""
  }${rawFirst ? ", raw FFI first" : ""}: memlife ${m.toFixed(0)} µs, raw FFI ${r.toFixed(0)} µs, ${
    (m / r).toFixed(2)
  }×` +
    (busy.raw.length > 0
      ? `; JS thread busy during a commit ${median(busy.memlife).toFixed(0)} and ${median(busy.raw).toFixed(0)} µs`
      : ""),
);
watched.release();
second.release();
