/**
 * A hostile stress, run by hand (no spec runs it: on PoCL 3.1 it can end in PoCL's own assertions):
 * hundreds of random memlife operations in flight at once on one queue, objects released while in
 * use, callbacks that throw or refuse, user events that gate a write and then complete or fail,
 * kernels on SVM and buffer copies whose results are checked (a wrong answer fails the run),
 * markers on other operations' events, queues released with commands in them, collections in between. It must end, leave `ctx.liveObjects` at its two queues, and the Embree
 * device's `memory.bytes` at 0.
 *
 *   node --expose-gc test/stress/random-ops.ts      (bun, or deno run -A --v8-flags=--expose-gc)
 *   env: STRESS_SEED=1, STRESS_WIDTH=200 (in flight), STRESS_TOTAL=4000, STRESS_SKIP=4 (op indices
 *   to leave out), STRESS_GATE_QUEUE=own|each (gated writes on a second queue, or a queue each),
 *   STRESS_EARLY_RELEASE=1 (a gated write's buffer released before its gate is settled)
 *
 * Stop 36 (2-vCPU VM, PoCL 3.1, Node), seeds 1-16: 8 runs ended in PoCL's assertions
 * (`pocl_lock_events_inorder`: an event's reference count 0; `pocl_update_event_running_unlocked`)
 * after that stop's fix, 7 before it (2 of them SIGSEGV) and one more with an object left. With no
 * gated writes (`STRESS_SKIP=4`) or a queue per gate (`STRESS_GATE_QUEUE=each`), none of 6 each.
 * What the fix took away is in test/fixtures/failed-gate-released.ts (README, Measured facts,
 * "PoCL 3.1 aborts when a user event fails under released commands").
 */
import process from "node:process";
import { cl, onCallbackError, rtc } from "../../src/mod.ts";

const env = (name: string, fallback: string) => process.env[name] ?? fallback;
let state = Number(env("STRESS_SEED", "1"));
const rand = () => (state = (state * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
const gc = (globalThis as { gc?: () => void }).gc ??
  (globalThis as { Bun?: { gc(full: boolean): void } }).Bun?.gc.bind(null, true);
let reported = 0;
onCallbackError(() => void reported++);

const ctx = cl.createContext();
const queue = ctx.createCommandQueue();
const gateQueue = ctx.createCommandQueue();
const coarse = ctx.devices[0].svm.coarseGrainBuffer;
const fine = ctx.devices[0].svm.fineGrainBuffer;
const device = rtc.newDevice("");
const program = ctx.createProgram(`
  __kernel void inc(__global const int *a, __global int *b, int n) {
    size_t i = get_global_id(0);
    if (i < n) b[i] = a[i] + 1;
  }`);
await program.build();
let wrong = 0;
/** A silent wrong answer: counted, printed once, and the run fails. */
function expect(ok: boolean, what: string): void {
  if (ok) return;
  if (wrong++ === 0) console.error(`wrong: ${what}`);
}
/** Events other operations made, retained here, for markers to wait on (they may fail or be released). */
const pool: InstanceType<typeof cl.Event>[] = [];
function share(event: InstanceType<typeof cl.Event>): void {
  if (pool.length < 16) pool.push(event.retain());
  else if (rand() < 0.5) {
    const i = Math.floor(rand() * pool.length);
    pool[i].release();
    pool[i] = event.retain();
  }
}
let refusals = 0;
device.setMemoryMonitorFunction((bytes) => {
  const r = rand();
  if (r < 0.02) throw new Error("the monitor throws");
  if (r < 0.04 && bytes > 0) {
    refusals++;
    return false;
  }
  return true;
});
function mesh(triangles: number): { vertices: Float32Array; indices: Uint32Array } {
  const vertices = new Float32Array(9 * triangles);
  const indices = new Uint32Array(3 * triangles);
  for (let i = 0; i < vertices.length; i++) vertices[i] = rand() * 10;
  for (let i = 0; i < indices.length; i++) indices[i] = i;
  return { vertices, indices };
}

const ops: (() => Promise<unknown>)[] = [
  // 0: a hostPtr "use" buffer written, maybe released while the write is pending, awaited destroyed.
  async () => {
    const host = new Uint8Array(4096);
    const b = ctx.createBuffer(host, { hostPtr: "use" });
    if (rand() < 0.5) {
      b.setDestructorCallback(() => {
        if (rand() < 0.3) throw undefined;
      });
    }
    const destroyed = b.destroyed.catch(() => {});
    const written = queue.writeBuffer(b, host).catch(() => {});
    if (rand() < 0.5) b.release();
    await written;
    if (b.alive) b.release();
    await destroyed;
  },
  // 1: SVM allocations freed in queue order, onFree throwing sometimes.
  async () => {
    if (!coarse) return;
    const allocations = Array.from(
      { length: 1 + Math.floor(rand() * 4) },
      () => ctx.svmAlloc(64 + Math.floor(rand() * 8192), { fineGrain: fine && rand() < 0.5 }),
    );
    const event = queue.enqueueSVMFree(allocations, {
      onFree: () => {
        if (rand() < 0.3) throw new Error("onFree throws");
      },
    });
    if (rand() < 0.5) await event.wait().catch(() => {});
    event.release();
  },
  // 2: a read whose buffer is released while it is pending.
  async () => {
    const b = ctx.createBuffer(1024);
    const read = queue.readBuffer(b, new Uint8Array(1024)).catch(() => {});
    b.release();
    await read;
  },
  // 3: an Embree scene committed, maybe released during its commit, traced if it committed.
  async () => {
    const scene = device.newScene();
    try {
      const { vertices, indices } = mesh(50 + Math.floor(rand() * 2000));
      scene.addTriangleMesh(vertices, indices);
      const committed = scene.commit().catch(() => {});
      if (rand() < 0.5) scene.release();
      await committed;
      if (scene.alive && scene.committed) scene.intersect1({ origin: [1, 1, -1], direction: [0, 0, 1] });
    } catch {
      // refused by the monitor
    } finally {
      if (scene.alive) scene.release();
    }
  },
  // 4: a write gated by a user event that then completes, fails, or is released without a status.
  async () => {
    const gate = ctx.createUserEvent();
    const b = ctx.createBuffer(256);
    const where = env("STRESS_GATE_QUEUE", "");
    const q = where === "each" ? ctx.createCommandQueue() : where === "own" ? gateQueue : queue;
    const written = q.writeBuffer(b, new Uint8Array(256), { waitFor: [gate] }).catch(() => {});
    if (env("STRESS_EARLY_RELEASE", "") !== "" && rand() < 0.3) b.release();
    const settle = rand();
    if (settle < 0.5) gate.setStatus(cl.ExecutionStatus.COMPLETE);
    else if (settle < 0.75) gate.setStatus(-5);
    if (b.alive) b.release();
    gate.release();
    await written;
    if (q !== queue && q !== gateQueue) {
      await q.finish().catch(() => {});
      q.release();
    }
  },
  // 5: a collection.
  () => Promise.resolve(gc?.()),
  // 6: a kernel on SVM: a filled by a memcpy, b = a + 1 checked through a map; the kernel and the
  // allocations released (or freed in queue order) right after the enqueue, sometimes before the map.
  async () => {
    if (!coarse) return;
    const n = 1 + Math.floor(rand() * 512);
    const a = ctx.svmAlloc(4 * n);
    const b = ctx.svmAlloc(4 * n);
    const input = Int32Array.from({ length: n }, (_, i) => i * 7);
    queue.enqueueSVMMemcpy(a, input).release();
    const k = program.createKernel("inc");
    k.setArg(0, a).setArg(1, b).setArg(2, cl.int(n));
    const run = queue.enqueueNDRangeKernel(k, [n]);
    share(run);
    k.release();
    if (rand() < 0.5) a.release();
    else queue.enqueueSVMFree([a]).release();
    if (rand() < 0.2) {
      b.release();
      run.release();
      return;
    }
    const m = await queue.mapSVM(b, { access: "read" });
    const out = new Int32Array(m.arrayBuffer);
    let bad = -1;
    for (let i = 0; i < n && bad < 0; i++) if (out[i] !== i * 7 + 1) bad = i;
    expect(bad < 0 || run.status < 0, `kernel output [${bad}] = ${out[bad]}, expected ${bad * 7 + 1}`);
    m.unmap().release();
    run.release();
    b.release();
  },
  // 7: a fill and a copy between buffers released at once, the copy read back and checked.
  async () => {
    const size = 4 * (1 + Math.floor(rand() * 256));
    const src = ctx.createBuffer(size);
    const dst = ctx.createBuffer(size);
    const value = Math.floor(rand() * 1000);
    queue.enqueueFillBuffer(src, cl.int(value)).release();
    const copy = queue.enqueueCopyBuffer(src, dst);
    share(copy);
    copy.release();
    src.release();
    const back = await queue.readBuffer(dst, new Int32Array(size / 4)).catch(() => null);
    dst.release();
    if (back !== null) expect(back.every((x) => x === value), `copied fill ${back[0]}, expected ${value}`);
  },
  // 8: a marker waiting on events other operations shared (some failed, some done), released early
  // or awaited; sometimes a barrier.
  async () => {
    const waitFor = pool.filter(() => rand() < 0.3).slice(0, 4);
    let m: InstanceType<typeof cl.Event>;
    try {
      m = rand() < 0.5 ? queue.enqueueMarker({ waitFor }) : queue.enqueueBarrier({ waitFor });
    } catch {
      return; // a failed event in the list, refused
    }
    if (rand() < 0.5) m.release();
    else {
      await m.wait().catch(() => {});
      m.release();
    }
  },
  // 9: a queue of its own, a write, a kernel and an SVM free with onFree on it, released without finish().
  async () => {
    const q = ctx.createCommandQueue();
    const b = ctx.createBuffer(64);
    const written = q.writeBuffer(b, new Uint8Array(64)).catch(() => {});
    const free = coarse ? q.enqueueSVMFree([ctx.svmAlloc(256)], { onFree: () => {} }) : undefined;
    const freed = free?.wait().catch(() => {});
    b.release();
    q.release();
    await written;
    await freed;
    free?.release();
  },
  // 10: the shared events dropped, all at once.
  () => {
    for (const e of pool.splice(0)) e.release();
    return Promise.resolve();
  },
];

const skip = new Set(env("STRESS_SKIP", "").split(",").filter((x) => x !== "").map(Number));
const width = Number(env("STRESS_WIDTH", "200"));
const total = Number(env("STRESS_TOTAL", "4000"));
let started = 0;
let done = 0;
await new Promise<void>((resolve, reject) => {
  const next = () => {
    if (started >= total) {
      if (done === total) resolve();
      return;
    }
    started++;
    let k = Math.floor(rand() * ops.length);
    if (skip.has(k)) k = 5; // a collection instead
    ops[k]().then(() => {
      done++;
      next();
    }, reject);
  };
  for (let i = 0; i < width; i++) next();
});
for (const e of pool.splice(0)) e.release();
await queue.finish().catch(() => {});
await gateQueue.finish().catch(() => {});
// Scenes released during their commits are freed once those ended; events kept behind gates by the 50 ms poll.
for (let i = 0; i < 40 && (ctx.liveObjects > 3 || device.memory.bytes !== 0); i++) {
  gc?.();
  await new Promise((r) => setTimeout(r, 50));
}
const live = ctx.liveObjects - 3;
const bytes = device.memory.bytes;
console.log(
  `seed ${env("STRESS_SEED", "1")}: ${done} operations, ${live} objects left besides the queues, ` +
    `${reported} callback errors reported, ${refusals} monitor refusals, ${bytes} Embree bytes left, ` +
    `${wrong} wrong answers`,
);
queue.release();
gateQueue.release();
program.release();
device.release();
ctx.release();
if (live !== 0 || bytes !== 0 || wrong !== 0) process.exit(1);
