/**
 * What one call of a JS memory monitor costs inside an Embree commit, by TBB thread count:
 *   bun bench/monitor-threads.ts | deno run -A bench/monitor-threads.ts | node bench/monitor-threads.ts
 *   [--triangles=10000] [--rounds=60]       (CONFIGS=",threads=1" picks the device configs)
 *
 * For each device config ("" is Embree's default, one thread per core) it commits the same scene
 * `rounds` times without a monitor and with a counting JS monitor, alternately, and prints the
 * median commit time of each, the monitor calls per commit, and the difference per call. Every
 * allocation of a build is a call from a TBB thread that waits for the JS thread's answer, so the
 * difference per call is the round trip from that thread to JS and back, on this machine.
 *
 * Under `perf sched record` this shows where Deno's time goes on 2 cores (README, Benchmarks).
 */
import { rtc } from "../src/mod.ts";
import process from "node:process";

const arg = (name: string, fallback: number) =>
  Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback);
const triangles = arg("triangles", 10_000);
const rounds = arg("rounds", 60);

/** A flat grid of about `triangles` triangles. */
function grid(triangles: number): { vertices: Float32Array; indices: Uint32Array } {
  const n = Math.max(1, Math.round(Math.sqrt(triangles / 2)));
  const vertices = new Float32Array((n + 1) * (n + 1) * 3);
  for (let y = 0; y <= n; y++) for (let x = 0; x <= n; x++) vertices.set([x, y, 0], (y * (n + 1) + x) * 3);
  const indices = new Uint32Array(n * n * 6);
  for (let y = 0; y < n; y++) {
    for (let x = 0; x < n; x++) {
      const v = y * (n + 1) + x;
      indices.set([v, v + 1, v + n + 1, v + 1, v + n + 2, v + n + 1], (y * n + x) * 6);
    }
  }
  return { vertices, indices };
}

const median = (values: number[]) => values.sort((a, b) => a - b)[values.length >> 1];
const mesh = grid(triangles);
const runtime = "Bun" in globalThis ? "bun" : "Deno" in globalThis ? "deno" : "node";
console.log(`${runtime}: Embree commit of ${mesh.indices.length / 3} triangles, median of ${rounds} each`);
for (const config of (process.env.CONFIGS ?? ",threads=1,threads=2,threads=4").split(",")) {
  const plain = rtc.newDevice(config);
  const watched = rtc.newDevice(config);
  let calls = 0;
  watched.setMemoryMonitorFunction((bytes) => {
    if (bytes > 0) calls++;
    return true;
  });
  const times: [number[], number[]] = [[], []];
  let commitCalls = 0;
  for (let r = 0; r < rounds; r++) {
    for (const [k, device] of [plain, watched].entries()) {
      const scene = device.newScene();
      scene.addTriangleMesh(mesh.vertices, mesh.indices);
      const before = calls;
      const start = performance.now();
      await scene.commit();
      times[k].push(performance.now() - start);
      if (k === 1) commitCalls += calls - before;
      scene.release();
    }
  }
  const [without, withMonitor] = times.map(median);
  const perCommit = commitCalls / rounds;
  const perCall = perCommit > 0 ? ((withMonitor - without) * 1000) / perCommit : 0;
  console.log(
    `  ${JSON.stringify(config).padEnd(12)} without ${(without * 1000).toFixed(0).padStart(6)} us   with a JS monitor ${
      (withMonitor * 1000).toFixed(0).padStart(6)
    } us (${(withMonitor / without).toFixed(2)}x)   ${perCommit.toFixed(1)} allocation calls   ${
      perCall.toFixed(0)
    } us per call`,
  );
  plain.release();
  watched.release();
}
