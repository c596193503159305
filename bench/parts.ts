/**
 * Where memlife's create + release time goes, part by part, on one runtime:
 *   bun bench/parts.ts | deno run -A --v8-flags=--expose-gc bench/parts.ts | node --expose-gc bench/parts.ts
 *   [--samples=9] [--part=buffer|svm|destructor|await|hostptr] [--full-gc] [--svm-viewed]
 *
 * --full-gc forces a full collection before each sample instead of a young one (bench/measure.ts,
 * `settler`, says why the bench does not). --svm-viewed first views a fine-grain SVM allocation as
 * an ArrayBuffer (and releases it): from then on every host view given to native code is asked
 * whether it is SVM memory (src/opencl/svm-memory.ts, `allocationBehind`), which the hostptr lines
 * then pay.
 *
 * Besides each line's time, the median of its per-round ratios to the section's first line.
 *
 * Each line adds one layer of the wrapper to the raw floor, so the differences between lines are
 * what each layer costs (all lines are sampled round-robin, like bench/cases.ts):
 *   raw                      clCreateBuffer + clReleaseMemObject in the runtime's fastest form (bench/raw.ts)
 *   raw, reentrant release   the same with the release in the form a buffer with a destructor needs
 *                            (Deno: off the fast call, `offFastPath`; Bun, Node: through defer_call)
 *   raw via memlife binding  the same two calls through memlife's own bindings (`opencl().symbols`,
 *                            and `unguarded` for the release, as Buffer.release() without a destructor)
 *   + Buffer object          raw calls + `new Buffer(...)` + `buf.release()` (object, safety net, checks)
 *   createBuffer + release   the public API: adds argument checks (`bufferArguments`) and the context's handle check
 *   safety net alone         SafetyNet.add + remove on a plain object (no native call)
 *   bufferArguments alone    the argument checks (no native call)
 * and the same for an SVM allocation freed through the queue (svmAlloc + enqueueSVMFree + event
 * release, queue.finish() every 256), the case furthest from its raw floor:
 *   svm raw                  clSVMAlloc + clEnqueueSVMFree + clReleaseEvent, reused out-arrays, fastest form
 *   raw + 1 us of JS         the same plus a 1 us busy wait per operation: on a machine with few
 *                            cores, JS time per operation competes with the driver's worker
 *                            threads, so it costs more than itself (PoCL on 2 cores: about 3x)
 *   + SVMAllocation          memlife's svmAlloc, then the raw free path
 *   + Event object           the same with the event wrapped in a cl.Event and released through it
 *   svmAlloc + enqueueSVMFree the public API
 * and a 4 KiB buffer with one destructor callback, every callback awaited at the end of a sample
 * (on NVIDIA they arrive on a driver thread; issue 14's "+1 destructor" row):
 *   no callback              raw create + release, the reference
 *   raw, own callback        raw calls + clSetMemObjectDestructorCallback with the runtime's own
 *                            callback (Deno's and Node's make a driver thread wait for the JS thread)
 *   raw, relayed callback    the same with an `event` callback of the backend: on Deno and Node the
 *                            prebuilt library's relay (ffi/event-relay.c) where it is loaded
 *   raw, 2 objects held      the relayed callback, with two small JS objects per buffer kept
 *                            until its callback came: what holding per-buffer state costs where a
 *                            driver thread delivers later (memlife holds the buffer and its entry)
 *   raw, +0.5 us JS a callback  the own callback spinning 0.5 us before it counts,
 *   raw, +0.5 us JS a microtask the same spin on a microtask the callback queues (whether a
 *                            driver thread waits for the microtasks its call queued too), and
 *   raw, +0.5 us JS a buffer    the loop spinning 0.5 us per buffer: what a handler's and a loop's
 *                            JS cost a buffer where a driver thread waits for each callback
 *   createBuffer + destructor the public API: createBuffer, setDestructorCallback, release
 *   createBuffer + destroyed  the same with `destroyed.then()` instead of a callback: settled in
 *                            the native call's callback, no deferred user callback
 * On Deno and Node the relay's counts follow: calls queued from other threads and the JS thread's
 * wake-ups to take them. With OPENCL_LIBRARY naming test/native/thread-driver.c's library (built
 * as its header says), the destructors come from a driver thread of the shim, one at a time, as a
 * GPU driver's do, on this machine's PoCL. And a 4 KiB `hostPtr: "use"` buffer awaited until destroyed, one at a
 * time (the bench's "hostPtr use" row; `--part=hostptr`):
 *   raw, own callback        clCreateBuffer(USE_HOST_PTR) + a destructor callback that resolves a promise
 *   raw, callback entered in the call  (Bun, Node) the same, the callback entered inside
 *                            clReleaseMemObject instead of run after it (ffi/deferred.c)
 *   + Buffer object          the same native calls, wrapped in memlife's Buffer, `destroyed` awaited
 *   + bufferArguments        the same with createBuffer's argument checks in front
 *   createBuffer(view, use)  the public API
 */
import { cl } from "../src/mod.ts";
import { backend } from "../src/backend.ts";
import { SafetyNet } from "../src/callbacks.ts";
import { bufferArguments } from "../src/opencl/buffer.ts";
import { fromFactory, surrender } from "../src/internal.ts";
import { openclCallbacks, openclSymbols } from "../ffi/symbols/opencl.ts";
import type { Pointer } from "../ffi/types.ts";
import * as ffi from "#ffi";
import { type Entry, measureAll, settler } from "./measure.ts";
import { openRaw, rawHostPtrLoop, type RawPointer } from "./raw.ts";
import { formatTime } from "./report.ts";

const samples = Number(process.argv.find((a) => a.startsWith("--samples="))?.slice(10) ?? 9);
const part = process.argv.find((a) => a.startsWith("--part="))?.slice(7);
const size = 4096;
const ctx = cl.createContext();
const context = ctx.unsafeHandle;
if (process.argv.includes("--svm-viewed")) {
  const viewed = ctx.svmAlloc(4096, { fineGrain: true });
  void viewed.arrayBuffer;
  viewed.release();
}
const raw = backend.open(cl.library().path, openclSymbols).symbols;
const own = cl.library().symbols;
// What Buffer.release() calls for a buffer with no destructor callback.
const ownUnguarded = cl.library().unguarded;
const fast = openRaw(cl.library().path);
const wideSize = fast.wide(size);
const rw = fast.wide(1);
const zero = fast.wide(0);
const errcode = new Int32Array(new ArrayBuffer(4));
// Every object is released before the turn ends: none has a state to register.
const net = new SafetyNet<number, object>(() => {}, () => undefined);
let sink = 0;

const entries: Entry[] = [
  ["raw", (n: number) => {
    for (let i = 0; i < n; i++) fast.clReleaseMemObject(fast.clCreateBuffer(context, rw, wideSize, null, errcode)!);
  }],
  ["raw, reentrant release", (n: number) => {
    for (let i = 0; i < n; i++) {
      fast.clReleaseMemObjectReentrant(fast.clCreateBuffer(context, rw, wideSize, null, errcode)!);
    }
  }],
  ["raw via memlife binding", (n: number) => {
    for (let i = 0; i < n; i++) ownUnguarded.clReleaseMemObject(own.clCreateBuffer(context, 1, size, null, errcode));
  }],
  ["+ Buffer object", (n: number) => {
    for (let i = 0; i < n; i++) {
      new cl.Buffer(fromFactory, ctx, raw.clCreateBuffer(context, 1, size, null, errcode), size, 1, null).release();
    }
  }],
  ["createBuffer + release", (n: number) => {
    for (let i = 0; i < n; i++) ctx.createBuffer(size).release();
  }],
  ["safety net alone", (n: number) => {
    for (let i = 0; i < n; i++) {
      const object = { i };
      net.add(object);
      net.remove(object);
    }
  }],
  ["bufferArguments alone", (n: number) => {
    for (let i = 0; i < n; i++) sink += bufferArguments(size, undefined).flags;
  }],
].map(([impl, body]) => ({ case: "parts", impl: impl as string, items: 1, body: body as Entry["body"] }));

const queue = ctx.createCommandQueue();
const q = queue.unsafeHandle;
const list = new BigUint64Array(new ArrayBuffer(8));
const slot = new BigUint64Array(new ArrayBuffer(8));
/** clEnqueueSVMFree of one pointer with no callback, into reused out-arrays: the cl_event is in `slot`. */
const rawEnqueueFree = (): void => {
  if (fast.clEnqueueSVMFree(q, 1, list, null, zero, 0, null, slot) !== 0) throw new Error("clEnqueueSVMFree failed");
};
/** The same, and the event's release, in the fastest form (bench/raw.ts). */
const rawFree = (pointer: RawPointer) => {
  fast.store(list, 0, pointer);
  rawEnqueueFree();
  fast.clReleaseEvent(fast.event(slot));
};
const spin = (us: number) => {
  const until = performance.now() + us / 1000;
  while (performance.now() < until);
};
const svm = (op: (i: number) => void) => async (n: number) => {
  for (let i = 0; i < n; i++) {
    op(i);
    if ((i + 1) % 256 === 0) await queue.finish();
  }
  await queue.finish();
};
const svmEntries: Entry[] = [
  ["svm raw", svm(() => rawFree(fast.clSVMAlloc(context, rw, wideSize, 0)))],
  [
    "raw + 1 us of JS",
    svm(() => {
      spin(1);
      rawFree(fast.clSVMAlloc(context, rw, wideSize, 0));
    }),
  ],
  [
    "+ SVMAllocation",
    svm(() => {
      // memlife's pointer (a pointer object on Deno, not the raw floor's bigint) into the list as memlife does
      backend.writePointer(list, 0, cl.SVMAllocation[surrender](ctx.svmAlloc(size)));
      rawEnqueueFree();
      fast.clReleaseEvent(fast.event(slot));
    }),
  ],
  [
    "+ Event object",
    svm(() => {
      backend.writePointer(list, 0, cl.SVMAllocation[surrender](ctx.svmAlloc(size)));
      rawEnqueueFree();
      new cl.Event(fromFactory, backend.readPointer(slot, 0)!, ctx).release();
    }),
  ],
  ["svmAlloc + enqueueSVMFree", svm(() => queue.enqueueSVMFree([ctx.svmAlloc(size)]).release())],
].map(([impl, body]) => ({ case: "parts", impl: impl as string, items: 1, body: body as Entry["body"] }));

let destroyed = 0;
let expected = 0;
let arrived: (() => void) | null = null;
const count = () => {
  if (++destroyed === expected && arrived !== null) arrived();
};
const ownDestructor = backend.callback({ ...openclCallbacks.memDestructor, delivery: "sync" }, count);
const relayedDestructor = backend.callback(openclCallbacks.memDestructor, count);
/**
 * Per-buffer JS state held until the buffer's callback arrives, as memlife must hold a buffer with
 * callbacks and its destructor entry: a ring of small objects, one let go per callback (a driver
 * thread delivers in release order).
 */
const RING = 1 << 20;
const held: unknown[] = new Array(RING).fill(undefined);
let heldIn = 0, heldOut = 0;
const holdingDestructor = backend.callback(openclCallbacks.memDestructor, () => {
  held[heldOut++ & (RING - 1)] = undefined;
  count();
});
/** The raw callback with 0.5 us of JS in it: what each µs of a handler's JS costs a buffer. */
const slowDestructor = backend.callback({ ...openclCallbacks.memDestructor, delivery: "sync" }, () => {
  spin(0.5);
  count();
});
/** The same 0.5 us run on a microtask the callback queues: does the driver thread wait for it too? */
const laterDestructor = backend.callback({ ...openclCallbacks.memDestructor, delivery: "sync" }, () => {
  queueMicrotask(() => spin(0.5));
  count();
});
/** Time spent issuing the calls and waiting for the last callbacks, per line (a driver thread may lag). */
const phases = new Map<string, { issue: number; wait: number }>();
/**
 * Each sample waits for every callback it asked for, woken by the last one (as C's baseline spins
 * on its counter): polling with a timer would add up to a timer tick per sample.
 */
const destructor = (impl: string, op: () => void) => async (n: number) => {
  const t0 = performance.now();
  expected = destroyed + n;
  for (let i = 0; i < n; i++) {
    op();
    if ((i + 1) % 1024 === 0) await null;
  }
  const t1 = performance.now();
  if (destroyed < expected) {
    await new Promise<void>((resolve, reject) => {
      const late = setTimeout(
        () => reject(new Error(`${expected - destroyed} destructor callbacks never came`)),
        10_000,
      );
      arrived = () => {
        clearTimeout(late);
        resolve();
      };
    });
    arrived = null;
  }
  const p = phases.get(impl) ?? { issue: 0, wait: 0 };
  p.issue += t1 - t0;
  p.wait += performance.now() - t1;
  phases.set(impl, p);
};
const withRawCallback = (callback: typeof ownDestructor) => () => {
  const mem = fast.clCreateBuffer(context, rw, wideSize, null, errcode)!;
  fast.clSetMemObjectDestructorCallback(mem, callback, zero);
  fast.clReleaseMemObjectReentrant(mem);
};
const destructorEntries: Entry[] = ([
  ["no callback", () => {
    fast.clReleaseMemObject(fast.clCreateBuffer(context, rw, wideSize, null, errcode)!);
    destroyed++;
  }],
  ["raw, own callback", withRawCallback(ownDestructor)],
  ["raw, relayed callback", withRawCallback(relayedDestructor)],
  ["raw, 2 objects held", () => {
    held[heldIn++ & (RING - 1)] = { a: 1, b: 2, c: 3, d: 4, e: { f: 5, g: 6, h: 7, i: 8, j: 9, k: 10, l: 11 } };
    withRawCallback(holdingDestructor)();
  }],
  ["raw, +0.5 us JS a callback", withRawCallback(slowDestructor)],
  ["raw, +0.5 us JS a microtask", withRawCallback(laterDestructor)],
  ["raw, +0.5 us JS a buffer", () => {
    spin(0.5);
    withRawCallback(ownDestructor)();
  }],
  ["createBuffer + destructor", () => {
    const buf = ctx.createBuffer(size);
    buf.setDestructorCallback(count);
    buf.release();
  }],
  ["createBuffer + destroyed", () => {
    const buf = ctx.createBuffer(size);
    buf.destroyed.then(count);
    buf.release();
  }],
] as const).map(([impl, op]) => ({ case: "parts", impl, items: 1, body: destructor(impl, op) }));
/** One buffer at a time, each awaited until its destructor ran: the latency of a callback. */
const oneByOne = (op: () => void) => async (n: number) => {
  // A driver thread's call is no pending work to Node's event loop: keep it alive meanwhile.
  const alive = setInterval(() => {}, 1 << 30);
  for (let i = 0; i < n; i++) {
    expected = destroyed + 1;
    const gone = new Promise<void>((resolve) => (arrived = resolve));
    op();
    await gone;
  }
  clearInterval(alive);
  arrived = null;
};
const awaitEntries: Entry[] = [
  ["raw, own callback", oneByOne(withRawCallback(ownDestructor))],
  ["raw, relayed callback", oneByOne(withRawCallback(relayedDestructor))],
  ["await buf.destroyed", async (n: number) => {
    for (let i = 0; i < n; i++) {
      const buf = ctx.createBuffer(size);
      buf.setDestructorCallback(count);
      buf.release();
      await buf.destroyed;
    }
  }],
].map(([impl, body]) => ({ case: "parts", impl: impl as string, items: 1, body: body as Entry["body"] }));
const relayCounts = (ffi as { eventRelayCounts?: () => object | null }).eventRelayCounts;

// hostPtr "use": one buffer at a time over the same host view, each awaited until its destructor
// ran (the bench's "hostPtr use" case). Each line adds one layer; measured in this loop, not alone:
// the argument checks cost two to three times more here than in a loop of their own.
const host = new Uint8Array(new ArrayBuffer(size));
const useFlags = 1 | 8; // CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR
/** One buffer at a time: made, `destroyed` read, released, awaited. */
const eachAwaited = (make: () => InstanceType<typeof cl.Buffer>) => async (n: number) => {
  for (let i = 0; i < n; i++) {
    const buf = make();
    const destroyed = buf.destroyed;
    buf.release();
    await destroyed;
  }
};
const hostEntries: Entry[] = [
  ["raw, own callback", rawHostPtrLoop(fast, context, host)],
  // Bun and Node (Deno's plain binding keeps a fast call no callback may run in): the callback
  // entered inside clReleaseMemObject, as before the deferring binding (ffi/deferred.c).
  ...(backend.runtime !== "deno"
    ? [
      [
        "raw, callback entered in the call",
        rawHostPtrLoop({ ...fast, clReleaseMemObjectReentrant: fast.clReleaseMemObject }, context, host),
      ] as const,
    ]
    : []),
  [
    "+ Buffer object",
    eachAwaited(() =>
      new cl.Buffer(
        fromFactory,
        ctx,
        own.clCreateBuffer(context, useFlags, size, host, errcode) as Pointer,
        size,
        useFlags,
        host,
      )
    ),
  ],
  [
    "+ bufferArguments",
    eachAwaited(() => {
      const { flags, size, data } = bufferArguments(host, { hostPtr: "use" });
      return new cl.Buffer(
        fromFactory,
        ctx,
        own.clCreateBuffer(context, flags, size, data, errcode) as Pointer,
        size,
        flags,
        data,
      );
    }),
  ],
  ["createBuffer(view, use)", eachAwaited(() => ctx.createBuffer(host, { hostPtr: "use" }))],
].map(([impl, body]) => ({ case: "parts", impl: impl as string, items: 1, body: body as Entry["body"] }));

const method = { sampleMs: 50, warmupMs: 100, samples };
const collect = process.argv.includes("--full-gc") ? fullGc() : settler();
const sections = [
  ["buffer", "create + release of a 4 KiB buffer", entries],
  ["svm", "SVM alloc + queued free, 4 KiB", svmEntries],
  ["destructor", "4 KiB buffer with one destructor callback", destructorEntries],
  ["await", "4 KiB buffer with one destructor callback, each awaited", awaitEntries],
  ["hostptr", '4 KiB hostPtr "use" buffer, each awaited until destroyed', hostEntries],
] as const;
for (const [name, title, list] of sections) {
  if (part !== undefined && part !== name) continue;
  const results = await measureAll(method, backend.runtime, list, collect);
  console.log(`${backend.runtime}: median per ${title} (${samples} samples, min–max)`);
  // Each line's ratio to the first, per round (samples of one round ran back to back), then the
  // median of those: a burst of load from other processes hits both sides of a ratio alike.
  const first = results[0];
  for (const r of results) {
    if (typeof r === "string") {
      console.log(`  ${r}`);
      continue;
    }
    const ratios = typeof first === "string" ? [] : r.samples.map((x, k) => x / first.samples[k]).sort((x, y) => x - y);
    const ratio = ratios.length === 0
      ? ""
      : `   ${ratios[ratios.length >> 1].toFixed(2)}x (${ratios[0].toFixed(2)}–${
        ratios[ratios.length - 1].toFixed(2)
      })`;
    console.log(
      `  ${r.impl.padEnd(26)} ${formatTime(r.median).padStart(9)}   (${formatTime(r.min)} – ${
        formatTime(r.max)
      })${ratio}`,
    );
  }
  if (name === "await" && relayCounts !== undefined) console.log(`  event relay: ${JSON.stringify(relayCounts())}`);
  if (name !== "destructor") continue;
  for (const [impl, p] of phases) {
    console.log(
      `  ${impl.padEnd(26)} waiting for the last callbacks: ${
        (100 * p.wait / (p.issue + p.wait)).toFixed(1)
      }% of the time`,
    );
  }
  if (relayCounts !== undefined) console.log(`  event relay: ${JSON.stringify(relayCounts())}`);
}
queue.release();
ctx.release();
if (sink === -1) console.log(sink);

function fullGc(): (() => void) | undefined {
  const g = globalThis as { gc?: () => void; Bun?: { gc(force: boolean): void } };
  return g.Bun ? () => g.Bun!.gc(true) : g.gc;
}
