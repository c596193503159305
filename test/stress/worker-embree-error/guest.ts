// The Worker of host.ts: eight devices whose configuration makes every commit raise an Embree
// error (an unknown acceleration structure or builder, RTC_ERROR_INVALID_ARGUMENT), so that Embree
// calls the device's error function, a callback of this Worker, from the thread that runs the
// commit. Posts "ready" when the commits are about to start; the host terminates it then.
import { rtc } from "../../../src/mod.ts";

type Post = (message: unknown) => void;
const g = globalThis as { postMessage?: Post; Bun?: unknown; Deno?: unknown };
const post: Post = g.Bun === undefined && g.Deno === undefined
  ? ((port) => (m: unknown) => port!.postMessage(m))((await import("node:worker_threads")).parentPort)
  : (m) => g.postMessage!(m);

const vertices = new Float32Array(200_000 * 9).map((_, i) => (i * 7919) % 101);
const indices = Uint32Array.from({ length: 600_000 }, (_, i) => i);
const scenes = [];
for (let i = 0; i < 8; i++) {
  const device = rtc.newDevice(i % 2 ? "tri_accel=nonsense" : "tri_builder=nonsense,threads=0");
  const scene = device.newScene();
  scene.addTriangleMesh(vertices, indices);
  scenes.push(scene);
}
post("ready");
await Promise.allSettled(scenes.map((scene) => scene.commit()));
post("done");
