/**
 * A CPU profile of one memlife loop on Node, taken in the process through `node:inspector`:
 * `--cpu-prof` writes its file at teardown, which a process that opened a native library skips
 * (README, "Exit"). Prints self time per function and per source line, the lines being where
 * koffi's native calls are charged (koffi's functions all show under one native name).
 *
 *   node bench/profile.ts [--case=create|use|svm|create-raw|use-raw|svm-raw] [--iterations=500000] [--loop-only]
 *
 *   create  ctx.createBuffer(4096).release()
 *   use     createBuffer(view, { hostPtr: "use" }), await destroyed, release: the bench's
 *           "hostPtr use" case
 *   svm     svmAlloc(4096) + enqueueSVMFree, queue.finish() every 256
 *   svm-raw the same through the bench's raw floor (bench/raw.ts): what memlife's JS adds is the
 *           difference between the two profiles' JS self time
 *   create-raw, use-raw  the same for the first two (use-raw: the bench's "raw, own callback")
 * --loop-only runs the loop and prints its ns per iteration, with no profiler: for Linux perf,
 * which bench/perf-diff.ts runs on a memlife case and its raw one (native frames too).
 */
import { Session } from "node:inspector/promises";
import { cl } from "../src/mod.ts";
import { openRaw, rawHostPtrLoop } from "./raw.ts";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  positionTicks?: { line: number; ticks: number }[];
}

const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const which = arg("case") ?? "create";
const iterations = Number(arg("iterations") ?? 500_000);

const ctx = cl.createContext();
const queue = ctx.createCommandQueue();
const host = new Uint8Array(new ArrayBuffer(4096));
const loops: Record<string, (n: number) => Promise<void> | void> = {
  create: (n) => {
    for (let i = 0; i < n; i++) ctx.createBuffer(4096).release();
  },
  use: async (n) => {
    for (let i = 0; i < n; i++) {
      const buffer = ctx.createBuffer(host, { hostPtr: "use" });
      const gone = buffer.destroyed;
      buffer.release();
      await gone;
    }
  },
  svm: async (n) => {
    for (let i = 0; i < n; i++) {
      queue.enqueueSVMFree([ctx.svmAlloc(4096)]).release();
      if (i % 256 === 255) await queue.finish();
    }
    await queue.finish();
  },
  "create-raw": (n) => {
    const f = openRaw(cl.library().path);
    const context = ctx.unsafeHandle, flags = f.wide(1), size = f.wide(4096), errcode = new Int32Array(1);
    for (let i = 0; i < n; i++) f.clReleaseMemObject(f.clCreateBuffer(context, flags, size, null, errcode)!);
  },
  "use-raw": (n) => rawHostPtrLoop(openRaw(cl.library().path), ctx.unsafeHandle, host)(n),
  "svm-raw": async (n) => {
    const f = openRaw(cl.library().path);
    const context = ctx.unsafeHandle, q = queue.unsafeHandle;
    const flags = f.wide(1), size = f.wide(4096), userData = f.wide(0);
    const list = new BigUint64Array(new ArrayBuffer(8)), slot = new BigUint64Array(new ArrayBuffer(8));
    for (let i = 0; i < n; i++) {
      f.store(list, 0, f.clSVMAlloc(context, flags, size, 0));
      if (f.clEnqueueSVMFree(q, 1, list, null, userData, 0, null, slot) !== 0) throw new Error("clEnqueueSVMFree");
      f.clReleaseEvent(f.event(slot));
      if (i % 256 === 255) await queue.finish();
    }
    await queue.finish();
  },
};
const loop = loops[which];
if (loop === undefined) throw new TypeError(`--case must be one of ${Object.keys(loops).join(", ")}`);

await loop(Math.min(iterations, 100_000)); // warm-up: optimized code before the profile starts
if (process.argv.includes("--loop-only")) {
  const started = performance.now();
  await loop(iterations);
  console.log(`${which}: ${((performance.now() - started) * 1e6 / iterations).toFixed(0)} ns per iteration`);
  queue.release();
  ctx.release();
  process.exit(0);
}
const session = new Session();
session.connect();
await session.post("Profiler.enable");
await session.post("Profiler.setSamplingInterval", { interval: 50 });
await session.post("Profiler.start");
const started = performance.now();
await loop(iterations);
const elapsed = performance.now() - started;
const { profile } = await session.post("Profiler.stop");
session.disconnect();

const nodes = new Map((profile.nodes as ProfileNode[]).map((node) => [node.id, node]));
const total = profile.samples?.length ?? 0;
const where = (node: ProfileNode) => `${node.callFrame.url.split("/").slice(-2).join("/")}`;
const bySelf = new Map<string, number>();
for (const id of profile.samples ?? []) {
  const node = nodes.get(id)!;
  const key = `${node.callFrame.functionName || "(anonymous)"} ${where(node)}:${node.callFrame.lineNumber + 1}`;
  bySelf.set(key, (bySelf.get(key) ?? 0) + 1);
}
const byLine = new Map<string, number>();
for (const node of nodes.values()) {
  for (const { line, ticks } of node.positionTicks ?? []) {
    const key = `${node.callFrame.functionName || "(anonymous)"} ${where(node)}:${line}`;
    byLine.set(key, (byLine.get(key) ?? 0) + ticks);
  }
}
const top = (counts: Map<string, number>) =>
  [...counts].sort((a, b) => b[1] - a[1]).slice(0, 20).map(([key, n]) =>
    `  ${(100 * n / total).toFixed(1).padStart(5)}%  ${key}`
  ).join("\n");
console.log(
  `${which}: ${(elapsed * 1e6 / iterations).toFixed(0)} ns per iteration under the profiler, ${total} samples`,
);
console.log(`self time per function:\n${top(bySelf)}`);
console.log(`self time per source line:\n${top(byLine)}`);
queue.release();
ctx.release();
