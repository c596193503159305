/**
 * What memlife's JavaScript costs per call, with the native calls replaced by JS stubs: what is
 * left is the wrapper's own work against the raw floor's, in ns, free of the driver's threads.
 *
 *   bun bench/js-cost.ts | deno run -A bench/js-cost.ts | node bench/js-cost.ts
 *     [--rounds=15] [--n=100000] [--only=<line>[|<line>...]] (some lines alone) [--profile] (Node, Deno:
 *     each line's self time per function, from the inspector's sampling profiler)
 *
 * Why: on a 2-core machine a ns of JS between two enqueues costs the SVM free row 2-3 ns (PoCL's
 * workers go idle and must be woken; bench/parts.ts "raw + N ns"), so the bench's ratios cannot
 * tell 5 ns from 15. Here each line is the same loop as the bench's, with every OpenCL entry point
 * it reaches a stub that returns at once (a buffer's destructor callback runs inside the stubbed
 * clReleaseMemObject, as PoCL runs it, straight into memlife's handler: the backend's delivery is
 * not measured). Lines, each the median of `rounds` samples taken round-robin:
 *   svm raw / svm memlife      alloc + queued free + event release (the bench's "enqueueSVMFree")
 *   svm memlife, options {}    the same with an empty options bag
 *   svm alloc raw / memlife    svmAlloc + release (clSVMAlloc + clSVMFree)
 *   event raw / memlife        a command's event: made from the enqueue's out-argument, released
 *   svm memlife, onFree awaited  with an `onFree` (called after the call returned, as PoCL's worker
 *                              does), `event.wait()` awaited each time
 *   writeBuffer awaited        `await queue.writeBuffer(buffer, view)`: enqueue, wait, release
 *   create raw / memlife       createBuffer(4096) + release
 *   hostPtr raw                clCreateBuffer(USE_HOST_PTR) + a destructor callback resolving a promise
 *   hostPtr + Buffer           the same calls wrapped in memlife's Buffer, `destroyed` awaited
 *   hostPtr + Buffer + checks  with createBuffer's argument checks (`bufferArguments`) in front
 *   hostPtr memlife            createBuffer(view, { hostPtr: "use" }), `destroyed` awaited, release
 *   ..., delivered later       the same two with the destructor delivered after the release returned,
 *                              as from a driver thread (NVIDIA): memlife then holds the event loop
 *   destructor raw / memlife, delivered later  the bench's "+1 destructor" loop (create, one
 *                              destructor callback, release), every callback delivered after the loop
 *   destructor raw / memlife, one per turn  the same, each callback on a microtask turn of its
 *                              own, after the drain the one before queued: as a driver thread
 *                              delivers them (NVIDIA), where the core's work per callback counts
 * The stubs replace the library's symbols for the whole process: never import this elsewhere.
 */
import { cl } from "../src/mod.ts";
import { backend } from "../src/backend.ts";
import { bufferArguments } from "../src/opencl/buffer.ts";
import { eventOut } from "../src/opencl/native.ts";
import { fromFactory, newCommand } from "../src/internal.ts";
const use = { hostPtr: "use" } as const;
import type { Callback, Pointer } from "../ffi/types.ts";

const rounds = Number(process.argv.find((a) => a.startsWith("--rounds="))?.slice(9) ?? 15);

// The trampolines are made on first use: from now on a "native callback" is its JS handler.
const handlers = new Map<Callback, (...args: unknown[]) => unknown>();
(backend as { callback: unknown }).callback = (_def: unknown, fn: (...args: unknown[]) => unknown) => {
  const marker = {} as Callback;
  handlers.set(marker, fn);
  return marker;
};

const ctx = cl.createContext();
const queue = ctx.createCommandQueue();
const fakeMemory = backend.fromAddress(0x10000n)!;
const fakeEvent = 0x20000n;
// One buffer alive at a time in every loop below: one pending destructor is enough.
let destructor: { fn: (...args: unknown[]) => unknown; id: unknown } | undefined;
let deliverLater = false;
/**
 * With `deliverLater`: one callback per microtask turn, each after the turn that ran the drain
 * memlife deferred for the one before, as a driver thread delivers them (one event-loop task each,
 * NVIDIA): the per-callback work of the core (its drain included) is then paid per buffer.
 */
let oneByOne = false;
const pending: unknown[] = [];
let pendingAt = 0;
let delivering = false;
function deliverNext(): void {
  const fn = pending[pendingAt] as (...args: unknown[]) => unknown;
  const mem = pending[pendingAt + 1], id = pending[pendingAt + 2];
  pending[pendingAt] = pending[pendingAt + 1] = pending[pendingAt + 2] = undefined;
  pendingAt += 3;
  if (pendingAt < pending.length) queueMicrotask(deliverNext);
  else {
    pending.length = pendingAt = 0;
    delivering = false;
  }
  fn(mem, id);
}
const stubs: Record<string, (...args: never[]) => unknown> = {
  clSVMAlloc: () => fakeMemory,
  clEnqueueSVMFree: (...args: unknown[]) => {
    (args[7] as BigUint64Array)[0] = fakeEvent;
    // With a pfn_free_func: called after the call returned, as PoCL's worker thread calls it.
    const fn = args[3] === null ? undefined : handlers.get(args[3] as Callback);
    if (fn !== undefined) queueMicrotask(() => fn(args[0], args[1], null, args[4]));
    return 0;
  },
  clSVMFree: () => undefined,
  clEnqueueWriteBuffer: (...args: unknown[]) => {
    (args[8] as BigUint64Array)[0] = fakeEvent;
    return 0;
  },
  clRetainEvent: () => 0,
  clReleaseEvent: () => 0,
  clCreateBuffer: () => fakeMemory,
  clSetMemObjectDestructorCallback: (_mem: Pointer, fn: Callback, id: unknown) => {
    destructor = { fn: handlers.get(fn)!, id };
    return 0;
  },
  clReleaseMemObject: (mem: Pointer) => {
    const d = destructor;
    destructor = undefined;
    if (d === undefined) return 0;
    // As a driver thread delivers it (NVIDIA): after the release returned, from the event loop.
    if (deliverLater && oneByOne) {
      pending.push(d.fn, mem, d.id);
      if (!delivering) {
        delivering = true;
        queueMicrotask(deliverNext);
      }
    } else if (deliverLater) queueMicrotask(() => d.fn(mem, d.id));
    else d.fn(mem, d.id);
    return 0;
  },
};
for (const table of [cl.library().symbols, cl.library().unguarded]) Object.assign(table, stubs);
// `event.wait()` is told by an event callback: its stub calls it back after the call returned,
// complete, as a driver's thread does.
const waitStubs: Record<string, (...args: never[]) => unknown> = {
  clFlush: () => 0,
  // What the wait reads once called back (CL_COMPLETE, 0, for every info the loops ask).
  clGetEventInfo: (_event: Pointer, _param: number, _size: number, value: Uint8Array | null) => {
    value?.fill(0);
    return 0;
  },
  clSetEventCallback: (event: Pointer, _type: number, fn: Callback, id: unknown) => {
    const handler = handlers.get(fn)!;
    queueMicrotask(() => handler(event, 0, id));
    return 0;
  },
};
for (const table of [cl.library().symbols, cl.library().unguarded]) Object.assign(table, waitStubs);

const s = stubs as unknown as Record<string, (...args: unknown[]) => unknown>;
const context = ctx.unsafeHandle, q = queue.unsafeHandle;
const list = new BigUint64Array(new ArrayBuffer(8)), slot = new BigUint64Array(new ArrayBuffer(8));
const errcode = new Int32Array(new ArrayBuffer(4));
const host = new Uint8Array(new ArrayBuffer(4096));
const empty = {};
let wake: (() => void) | undefined;
const rawDestructor = {} as Callback;
handlers.set(rawDestructor, () => wake!());

/** A hostPtr "use" buffer awaited until destroyed, one at a time: raw calls and a promise. */
async function rawHostPtr(n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const gone = new Promise<void>((resolve) => (wake = resolve));
    const mem = s.clCreateBuffer(context, 9, 4096, host, errcode) as Pointer;
    s.clSetMemObjectDestructorCallback(mem, rawDestructor, 0);
    s.clReleaseMemObject(mem);
    await gone;
  }
}

/** The same through memlife's public API. */
async function memlifeHostPtr(n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const buffer = ctx.createBuffer(host, { hostPtr: "use" });
    const gone = buffer.destroyed;
    buffer.release();
    await gone;
  }
}

/** The bench's "+1 destructor" loop: each buffer with one callback, all delivered after their release. */
let counted = 0;
let lastCounted: (() => void) | undefined;
const count = () => {
  counted++;
  if (lastCounted !== undefined && !delivering) {
    const wake = lastCounted;
    lastCounted = undefined;
    wake();
  }
};
const rawCount = {} as Callback;
handlers.set(rawCount, count);
async function destructorLoop(n: number, op: () => void): Promise<void> {
  deliverLater = true;
  const expected = counted + n;
  for (let i = 0; i < n; i++) op();
  // The stub delivers on microtasks, and memlife's deferred callbacks run on one more: no timer
  // (a timer's turn costs Deno a millisecond, as much as a thousand buffers). One by one, a
  // microtask turn each: awaited until the last.
  if (oneByOne && counted < expected) await new Promise<void>((resolve) => (lastCounted = resolve));
  for (let turns = 0; counted < expected && turns < 4; turns++) await null;
  deliverLater = false;
  if (counted !== expected) throw new Error(`${expected - counted} destructor callbacks missing`);
}

async function oneCallbackPerTurn(loop: () => void | Promise<void>): Promise<void> {
  oneByOne = true;
  try {
    await loop();
  } finally {
    oneByOne = false;
  }
}

const lines: Record<string, (n: number) => void | Promise<void>> = {
  "svm raw": (n) => {
    for (let i = 0; i < n; i++) {
      backend.writePointer(list, 0, s.clSVMAlloc(context, 1, 4096, 0) as Pointer);
      if (s.clEnqueueSVMFree(q, 1, list, null, 0, 0, null, slot) !== 0) throw new Error("clEnqueueSVMFree");
      s.clReleaseEvent(backend.readPointer(slot, 0));
    }
  },
  "svm alloc raw": (n) => {
    for (let i = 0; i < n; i++) s.clSVMFree(context, s.clSVMAlloc(context, 1, 4096, 0));
  },
  "svm alloc memlife": (n) => {
    for (let i = 0; i < n; i++) ctx.svmAlloc(4096).release();
  },
  "event raw": (n) => {
    for (let i = 0; i < n; i++) s.clReleaseEvent(backend.fromAddress(fakeEvent));
  },
  "event memlife": (n) => {
    const commands = cl.CommandQueue as unknown as {
      [newCommand](queue: cl.CommandQueue, after: undefined, quiet: boolean): cl.Event;
    };
    for (let i = 0; i < n; i++) {
      eventOut[0] = fakeEvent;
      commands[newCommand](queue, undefined, true).release();
    }
  },
  "svm memlife": (n) => {
    for (let i = 0; i < n; i++) queue.enqueueSVMFree([ctx.svmAlloc(4096)]).release();
  },
  "svm memlife, options {}": (n) => {
    for (let i = 0; i < n; i++) queue.enqueueSVMFree([ctx.svmAlloc(4096)], empty).release();
  },
  "svm memlife, onFree awaited": async (n) => {
    let freed = 0;
    const onFree = () => void freed++;
    for (let i = 0; i < n; i++) {
      const event = queue.enqueueSVMFree([ctx.svmAlloc(4096)], { onFree });
      await event.wait();
      event.release();
    }
    if (freed !== n) throw new Error(`onFree ran ${freed} times for ${n} frees`);
  },
  "writeBuffer awaited": async (n) => {
    const buffer = ctx.createBuffer(4096);
    for (let i = 0; i < n; i++) await queue.writeBuffer(buffer, host);
    buffer.release();
  },
  "create raw": (n) => {
    for (let i = 0; i < n; i++) s.clReleaseMemObject(s.clCreateBuffer(context, 1, 4096, null, errcode));
  },
  "create memlife": (n) => {
    for (let i = 0; i < n; i++) ctx.createBuffer(4096).release();
  },
  "hostPtr raw": rawHostPtr,
  "hostPtr + Buffer": async (n) => {
    for (let i = 0; i < n; i++) {
      const buffer = new cl.Buffer(
        fromFactory,
        ctx,
        s.clCreateBuffer(context, 9, 4096, host, errcode) as Pointer,
        4096,
        9,
        host,
      );
      const gone = buffer.destroyed;
      buffer.release();
      await gone;
    }
  },
  "hostPtr + Buffer + checks": async (n) => {
    for (let i = 0; i < n; i++) {
      const a = bufferArguments(host, use);
      const buffer = new cl.Buffer(
        fromFactory,
        ctx,
        s.clCreateBuffer(context, a.flags, a.size, a.data, errcode) as Pointer,
        a.size,
        a.flags,
        a.data,
      );
      const gone = buffer.destroyed;
      buffer.release();
      await gone;
    }
  },
  "hostPtr memlife": memlifeHostPtr,
  "hostPtr raw, delivered later": async (n) => {
    deliverLater = true;
    // A callback from a driver thread is no pending work to the event loop: a timer holds it.
    const alive = setInterval(() => {}, 1 << 30);
    await rawHostPtr(n);
    clearInterval(alive);
    deliverLater = false;
  },
  "destructor raw, delivered later": (n) =>
    destructorLoop(n, () => {
      const mem = s.clCreateBuffer(context, 1, 4096, null, errcode) as Pointer;
      s.clSetMemObjectDestructorCallback(mem, rawCount, 0);
      s.clReleaseMemObject(mem);
    }),
  "destructor memlife, delivered later": (n) =>
    destructorLoop(n, () => {
      const buffer = ctx.createBuffer(4096);
      buffer.setDestructorCallback(count);
      buffer.release();
    }),
  "destructor raw, one per turn": (n) => oneCallbackPerTurn(() => lines["destructor raw, delivered later"](n)),
  "destructor memlife, one per turn": (n) => oneCallbackPerTurn(() => lines["destructor memlife, delivered later"](n)),
  "hostPtr memlife, delivered later": async (n) => {
    deliverLater = true;
    await memlifeHostPtr(n);
    deliverLater = false;
  },
};

/**
 * `--profile` (Node, Deno): self time per function of each line's loop, run once more under the
 * inspector's sampling profiler (`--cpu-prof` writes nothing: the process ends with _exit).
 */
async function profile(): Promise<void> {
  const { Session } = await import("node:inspector/promises");
  for (const name of names) {
    const session = new Session();
    session.connect();
    await session.post("Profiler.enable");
    await session.post("Profiler.setSamplingInterval", { interval: 20 });
    await session.post("Profiler.start");
    await lines[name](n);
    const { profile } = await session.post("Profiler.stop");
    session.disconnect();
    type Node = { id: number; callFrame: { functionName: string; url: string; lineNumber: number } };
    const nodes = new Map((profile.nodes as Node[]).map((node) => [node.id, node]));
    const self = new Map<string, number>();
    for (const id of profile.samples ?? []) {
      const { functionName, url, lineNumber } = nodes.get(id)!.callFrame;
      const key = `${functionName || "(anonymous)"} ${url.split("/").slice(-2).join("/")}:${lineNumber + 1}`;
      self.set(key, (self.get(key) ?? 0) + 1);
    }
    const total = profile.samples?.length ?? 1;
    console.log(`${name}: self time per function (${total} samples)`);
    for (const [key, count] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 25)) {
      console.log(`  ${(100 * count / total).toFixed(1).padStart(5)}%  ${key}`);
    }
  }
}

const only = process.argv.find((a) => a.startsWith("--only="))?.slice(7);
const names = Object.keys(lines).filter((k) => only === undefined || only.split("|").includes(k));
const n = Number(process.argv.find((a) => a.startsWith("--n="))?.slice(4) ?? 100_000);
const samples: Record<string, number[]> = Object.fromEntries(names.map((name) => [name, []]));
for (const name of names) await lines[name](n); // warm-up
for (let r = 0; r < rounds; r++) {
  for (const name of names) {
    const t0 = performance.now();
    await lines[name](n);
    samples[name].push((performance.now() - t0) * 1e6 / n);
  }
  // A turn of the event loop between rounds, as a program has: the safety nets promote then.
  await new Promise((resolve) => setTimeout(resolve, 0));
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
console.log(`${backend.runtime}: JS ns per call, native calls stubbed (median of ${rounds})`);
for (const name of names) console.log(`  ${name.padEnd(34)} ${median(samples[name]).toFixed(1).padStart(7)} ns`);
if (process.argv.includes("--profile")) await profile();
// The stubbed context and queue must not reach the real library's release: leave at once.
process.exit(0);
