/**
 * The benchmark cases of one runtime, run by bench/main.ts as a process of its own:
 *   bun bench/cases.ts | deno run -A bench/cases.ts | node --expose-gc bench/cases.ts
 * with --group=opencl|embree|all --filter=substr --sample-ms= --warmup-ms= --samples=
 * --triangles=10000,100000 --budget=bytes. Prints JSON lines (bench/measure.ts) on stdout.
 *
 * Each case is measured twice: through memlife's public API ("memlife") and as the raw floor
 * ("raw"): the very same native calls through `backend.open` bindings of the same backend, with
 * no wrapper, so the ratio between the two is what memlife itself costs on this runtime.
 */
import * as memlife from "../src/mod.ts";
import { cl } from "../src/mod.ts";
import { backend } from "../src/backend.ts";
import type { CallbackDef } from "../ffi/types.ts";
import { openclCallbacks, openclSymbols } from "../ffi/symbols/opencl.ts";
import { embreeCallbacks, embreeSymbols } from "../ffi/symbols/embree.ts";
import { libcSymbols, RTLD_GLOBAL, RTLD_NODELETE, RTLD_NOW } from "../ffi/symbols/libc.ts";
import { openRaw, type RawPointer, rawTriangleMesh } from "./raw.ts";
import { type Body, emit, type Entry, measureAll, type MeasureOptions, settler } from "./measure.ts";
import {
  budgetBytes,
  type CaseSpec,
  embreeCases,
  matches,
  mesh,
  openclCases,
  pipelineKernel,
  triangleSets,
} from "./plan.ts";

// ---- options ------------------------------------------------------------------------------------

const args = new Map(
  process.argv.slice(2).map((a) => {
    const eq = a.indexOf("=");
    return eq < 0 ? [a, "true"] : [a.slice(0, eq), a.slice(eq + 1)];
  }),
);
const method: MeasureOptions = {
  sampleMs: Number(args.get("--sample-ms") ?? 50),
  warmupMs: Number(args.get("--warmup-ms") ?? 100),
  samples: Number(args.get("--samples") ?? 5),
};
const filter = args.get("--filter") || undefined;
const group = args.get("--group") ?? "all";
const triangles = args.get("--triangles")?.split(",").map(Number) ?? [...triangleSets.default];
const budget = Number(args.get("--budget") ?? budgetBytes);
const runtime = backend.runtime;

// ---- helpers ------------------------------------------------------------------------------------

const g = globalThis as { Bun?: { version: string }; Deno?: { version: { deno: string } } };
const collect = settler();
const version = g.Bun ? g.Bun.version : g.Deno ? g.Deno.version.deno : process.versions.node;

const tick = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

/**
 * Waits for callbacks still owed (a driver may deliver them on its own thread, later). On PoCL they
 * have all run already and this returns at once.
 */
async function until(done: () => boolean, what: string): Promise<void> {
  for (let i = 0; !done(); i++) {
    if (i > 20_000) throw new Error(`gave up waiting for ${what}`);
    await (i < 8 ? null : tick());
  }
}

/** One implementation of a case: a body to measure, or the reason it can't be measured. */
interface Impl {
  readonly impl: string;
  readonly body: Body | string;
  readonly perOp?: () => Record<string, number>;
}

/**
 * Measures implementations that are compared with each other (bench/measure.ts samples them
 * round-robin) and prints a line for each: its result, or why there is none.
 */
async function bench(
  items: readonly { spec: CaseSpec; impls: readonly Impl[] }[],
  options: MeasureOptions = method,
): Promise<void> {
  const entries: Entry[] = [];
  for (const { spec, impls } of items) {
    for (const { impl, body, perOp } of impls) {
      if (typeof body === "string") emit({ type: "unavailable", case: spec.name, runtime, impl, reason: body });
      else entries.push({ case: spec.name, impl, items: spec.triangles ?? 1, body, perOp });
    }
  }
  // A young-generation collection before each sample: each sample pays for its own garbage, not
  // for the garbage of the entry sampled before it (a full one would measure V8's re-optimization
  // after it, not memlife: see `settler`).
  const results = await measureAll(options, runtime, entries, collect);
  results.forEach((result, i) => {
    const { case: name, impl } = entries[i];
    emit(typeof result === "string" ? { type: "unavailable", case: name, runtime, impl, reason: result } : result);
  });
}

function unavailableAll(specs: readonly CaseSpec[], reason: string): void {
  for (const spec of specs) {
    for (const impl of spec.impls) emit({ type: "unavailable", case: spec.name, runtime, impl, reason });
  }
}

// ---- OpenCL -------------------------------------------------------------------------------------

const READ_WRITE = 1; // CL_MEM_READ_WRITE
const USE_HOST_PTR = 8; // CL_MEM_USE_HOST_PTR
/** Like bench/baseline.c: queue.finish() after every SVM_BATCH frees, so queued work stays bounded. */
const SVM_BATCH = 256;
/** Yield to the event loop every so often in callback loops, as a program that does other work would. */
const YIELD_EVERY = 1024;

async function openclBenchmarks(): Promise<void> {
  const specs = openclCases.filter((s) => matches(s, filter));
  if (specs.length === 0) return;
  let ctx: cl.Context;
  let queue: cl.CommandQueue;
  try {
    ctx = cl.createContext();
    queue = ctx.createCommandQueue();
  } catch (error) {
    unavailableAll(specs, `no OpenCL context: ${error instanceof Error ? error.message : String(error)}`);
    return;
  }
  const device = ctx.devices[0];
  emit({ type: "info", runtime, version, device: device.name, platform: device.platform.name });

  // The raw floor: the same library, bound again, on memlife's own context. The create and SVM
  // cases call it in the fastest form this runtime offers (bench/raw.ts); the pipeline case
  // through the backend's bindings.
  const raw = backend.open(cl.library().path, openclSymbols);
  const s = raw.symbols;
  const f = openRaw(cl.library().path);
  const rw = f.wide(READ_WRITE);
  /** user_data ids in the form the fastest call takes. */
  const ids = Array.from({ length: SVM_BATCH + 1 }, (_, i) => f.wide(i));
  const context = ctx.unsafeHandle;
  const q = queue.unsafeHandle;
  const errcode = new Int32Array(new ArrayBuffer(4));
  const eventSlot = new BigUint64Array(new ArrayBuffer(8));
  const svmList = new BigUint64Array(new ArrayBuffer(8));

  // Raw callbacks: process-lifetime trampolines, like memlife's, that only count (and wake a waiter),
  // in the fastest form. Bun: its event slots (a driver thread goes on at once; on the JS thread,
  // inside the reentrant release, a destructor runs after the call, ffi/deferred.c). Node: the
  // destructor through the prebuilt library's relay as memlife's (ffi/event-relay.c; after the call
  // too: entered inside it, it cost Node 70-100 ns more). Otherwise the runtime's thread-safe
  // callback, whose caller waits until the JS thread ran it, which is what `sync` delivery is there:
  // the SVM free's floor reuses its ids batch after batch, which needs every callback run by the
  // time clFinish returned (through Node's relay, later: the pointers of a batch were overwritten
  // before their callbacks ran, PoCL's SVM list grew, and clSVMFree took 20-35 us).
  const own = <D extends CallbackDef>(def: D): D =>
    backend.runtime === "bun" || (backend.runtime === "node" && (def as CallbackDef) === openclCallbacks.memDestructor)
      ? def
      : { ...def, delivery: "sync" };
  let rawDestroyed = 0;
  let wake: (() => void) | undefined;
  const rawDestructor = backend.callback(own(openclCallbacks.memDestructor), () => {
    rawDestroyed++;
    wake?.();
  });
  // With pfn_free_func the application frees the pointers. Bun's svm_pointers array may be gone
  // by the time a queued callback runs (DESIGN.md), so the pointers stay on the JS side, by id.
  const rawPending: RawPointer[] = new Array(SVM_BATCH + 1).fill(null);
  let rawFreed = 0;
  const rawSvmFree = backend.callback(
    own(openclCallbacks.svmFree),
    (_q: unknown, _n: number, _p: unknown, id: number) => {
      f.clSVMFree(context, rawPending[id]);
      rawPending[id] = null;
      rawFreed++;
    },
  );

  let destroyed = 0;
  const onDestroyed = () => void destroyed++;
  let freed = 0;
  const onFree = () => void freed++;
  const host = new Uint8Array(new ArrayBuffer(4096));

  const svmReason = !device.svm.coarseGrainBuffer
    ? `device "${device.name}" has no SVM (CL_DEVICE_SVM_CAPABILITIES)`
    : s.clSVMAlloc === undefined
    ? "the OpenCL library has no clSVMAlloc (OpenCL 2.0)"
    : undefined;

  const items: { spec: CaseSpec; impls: Impl[] }[] = [];
  const cleanups: (() => void)[] = [];
  for (const spec of specs) {
    const size = spec.bytes!;
    const wideSize = f.wide(size);
    const k = spec.callbacks ?? 0;
    let rawBody: Body | string;
    let memlifeBody: Body | string;
    if (spec.kind === "create" || spec.kind === "callbacks") {
      rawBody = async (n) => {
        const expected = rawDestroyed + n * k;
        for (let i = 0; i < n; i++) {
          const mem = f.clCreateBuffer(context, rw, wideSize, null, errcode);
          if (mem === null) throw new Error(`clCreateBuffer: ${errcode[0]}`);
          for (let j = 0; j < k; j++) f.clSetMemObjectDestructorCallback(mem, rawDestructor, ids[0]);
          if ((k > 0 ? f.clReleaseMemObjectReentrant(mem) : f.clReleaseMemObject(mem)) !== 0) {
            throw new Error("clReleaseMemObject failed");
          }
          if (k > 0 && i % YIELD_EVERY === YIELD_EVERY - 1) await null;
        }
        await until(() => rawDestroyed >= expected, "destructor callbacks");
      };
      memlifeBody = async (n) => {
        const expected = destroyed + n * k;
        for (let i = 0; i < n; i++) {
          const buf = ctx.createBuffer(size);
          for (let j = 0; j < k; j++) buf.setDestructorCallback(onDestroyed);
          buf.release();
          if (k > 0 && i % YIELD_EVERY === YIELD_EVERY - 1) await null;
        }
        // memlife runs destructor callbacks on a microtask after release(): they are part of the cost.
        await until(() => destroyed >= expected, "destructor callbacks");
      };
    } else if (spec.kind === "await") {
      // One buffer at a time, each awaited until its destructor ran: what reusing host memory
      // takes. The raw floor awaits a bare promise that its own destructor callback resolves.
      const use = spec.name.includes("hostPtr");
      const flags = f.wide(READ_WRITE | (use ? USE_HOST_PTR : 0));
      rawBody = async (n) => {
        // A callback from a driver thread (NVIDIA) is no pending work to Node's event loop: a
        // timer keeps it alive, as memlife's own keep-alive does (else Node exits 13 mid-await).
        const alive = setInterval(() => {}, 1 << 30);
        for (let i = 0; i < n; i++) {
          const gone = new Promise<void>((resolve) => (wake = resolve));
          const mem = f.clCreateBuffer(context, flags, wideSize, use ? host : null, errcode);
          if (mem === null) throw new Error(`clCreateBuffer: ${errcode[0]}`);
          f.clSetMemObjectDestructorCallback(mem, rawDestructor, ids[0]);
          if (f.clReleaseMemObjectReentrant(mem) !== 0) throw new Error("clReleaseMemObject failed");
          await gone;
        }
        clearInterval(alive);
        wake = undefined;
      };
      memlifeBody = async (n) => {
        for (let i = 0; i < n; i++) {
          const buf = use ? ctx.createBuffer(host, { hostPtr: "use" }) : ctx.createBuffer(size);
          const gone = buf.destroyed;
          buf.release();
          await gone;
        }
      };
    } else if (svmReason !== undefined) {
      rawBody = memlifeBody = svmReason;
    } else if (spec.kind === "pipeline") {
      [rawBody, memlifeBody] = await pipelineBodies(size);
    } else {
      const mode = spec.name.endsWith("release") ? "release" : spec.name.endsWith("onFree") ? "onFree" : "enqueue";
      rawBody = async (n) => {
        const expected = rawFreed + (mode === "onFree" ? n : 0);
        for (let i = 0; i < n; i++) {
          const ptr = f.clSVMAlloc(context, rw, wideSize, 0);
          if (!ptr) throw new Error("clSVMAlloc returned NULL");
          if (mode === "release") {
            f.clSVMFree(context, ptr);
            continue;
          }
          f.store(svmList, 0, ptr);
          let status: number;
          if (mode === "onFree") {
            const id = (i % SVM_BATCH) + 1;
            rawPending[id] = ptr;
            status = f.clEnqueueSVMFreeReentrant(q, 1, svmList, rawSvmFree, ids[id], 0, null, eventSlot);
          } else {
            status = f.clEnqueueSVMFree(q, 1, svmList, null, ids[0], 0, null, eventSlot);
          }
          if (status !== 0) throw new Error(`clEnqueueSVMFree: ${status}`);
          if (mode === "onFree") f.clReleaseEventReentrant(f.event(eventSlot));
          else f.clReleaseEvent(f.event(eventSlot));
          if ((i + 1) % SVM_BATCH === 0) await raw.async.clFinish(q);
        }
        if (mode !== "release") await raw.async.clFinish(q);
        await until(() => rawFreed >= expected, "SVM free callbacks");
      };
      memlifeBody = async (n) => {
        const expected = freed + (mode === "onFree" ? n : 0);
        const options = mode === "onFree" ? { onFree } : {};
        for (let i = 0; i < n; i++) {
          const allocation = ctx.svmAlloc(size);
          if (mode === "release") {
            allocation.release();
            continue;
          }
          queue.enqueueSVMFree([allocation], options).release();
          if ((i + 1) % SVM_BATCH === 0) await queue.finish();
        }
        if (mode !== "release") await queue.finish();
        await until(() => freed >= expected, "onFree callbacks");
      };
    }
    items.push({ spec, impls: [{ impl: "raw", body: rawBody }, { impl: "memlife", body: memlifeBody }] });
  }
  /**
   * The pipeline case, raw and memlife. Both use the same built kernel (memlife's, through its
   * handle for the raw floor): building is set-up, not part of an iteration.
   */
  async function pipelineBodies(size: number): Promise<[Body | string, Body | string]> {
    const program = ctx.createProgram(pipelineKernel);
    try {
      await program.build();
    } catch (error) {
      program.release();
      const reason = `the pipeline kernel does not build: ${error instanceof Error ? error.message : String(error)}`;
      return [reason, reason];
    }
    const kernel = program.createKernel("pipeline");
    const k = kernel.unsafeHandle;
    const items = size / 4;
    const input = Int32Array.from({ length: items }, (_, i) => i);
    const output = new Int32Array(new ArrayBuffer(size));
    const outputPtr = backend.pointerOf(output);
    const argSlot = new BigUint64Array(new ArrayBuffer(8));
    const factor = new Int32Array([3]);
    const globalSize = new BigUint64Array([BigInt(items)]);
    const waitSlot = new BigUint64Array(new ArrayBuffer(8));
    const check = (status: number, fn: string) => {
      if (status !== 0) throw new Error(`${fn}: ${status}`);
    };
    const rawBody: Body = async (n) => {
      const expected = rawDestroyed + n;
      for (let i = 0; i < n; i++) {
        const mem = s.clCreateBuffer(context, READ_WRITE, size, null, errcode);
        if (mem === null) throw new Error(`clCreateBuffer: ${errcode[0]}`);
        check(s.clSetMemObjectDestructorCallback(mem, rawDestructor, 0), "clSetMemObjectDestructorCallback");
        const svm = s.clSVMAlloc(context, READ_WRITE, size, 0);
        if (svm === null) throw new Error("clSVMAlloc returned NULL");
        check(s.clEnqueueWriteBuffer(q, mem, 0, 0, size, input, 0, null, eventSlot), "clEnqueueWriteBuffer");
        s.clReleaseEvent(backend.fromAddress(eventSlot[0]));
        argSlot[0] = backend.address(mem);
        check(s.clSetKernelArg(k, 0, 8, argSlot), "clSetKernelArg");
        check(s.clSetKernelArgSVMPointer(k, 1, svm), "clSetKernelArgSVMPointer");
        check(s.clSetKernelArg(k, 2, 4, factor), "clSetKernelArg");
        check(s.clEnqueueNDRangeKernel(q, k, 1, null, globalSize, null, 0, null, eventSlot), "clEnqueueNDRangeKernel");
        s.clReleaseEvent(backend.fromAddress(eventSlot[0]));
        check(s.clEnqueueSVMMemcpy(q, 0, outputPtr, svm, size, 0, null, eventSlot), "clEnqueueSVMMemcpy");
        waitSlot[0] = eventSlot[0];
        check(await raw.async.clWaitForEvents(1, waitSlot) as number, "clWaitForEvents");
        s.clReleaseEvent(backend.fromAddress(waitSlot[0]));
        svmList[0] = backend.address(svm);
        check(s.clEnqueueSVMFree(q, 1, svmList, null, 0, 0, null, eventSlot), "clEnqueueSVMFree");
        s.clReleaseEvent(backend.fromAddress(eventSlot[0]));
        check(s.clReleaseMemObject(mem), "clReleaseMemObject");
      }
      await raw.async.clFinish(q);
      await until(() => rawDestroyed >= expected, "destructor callbacks");
      if (output[items - 1] !== (items - 1) * 3 + 1) throw new Error("the raw pipeline computed a wrong result");
    };
    const k3 = cl.int(3);
    const global = [items];
    const memlifeBody: Body = async (n) => {
      const expected = destroyed + n;
      for (let i = 0; i < n; i++) {
        const buffer = ctx.createBuffer(size);
        buffer.setDestructorCallback(onDestroyed);
        const svm = ctx.svmAlloc(size);
        queue.enqueueWriteBuffer(buffer, input).release();
        kernel.setArg(0, buffer).setArg(1, svm).setArg(2, k3);
        queue.enqueueNDRangeKernel(kernel, global).release();
        const read = queue.enqueueSVMMemcpy(output, svm);
        await read.wait();
        read.release();
        queue.enqueueSVMFree([svm]).release();
        buffer.release();
      }
      await queue.finish();
      await until(() => destroyed >= expected, "destructor callbacks");
      if (output[items - 1] !== (items - 1) * 3 + 1) throw new Error("the memlife pipeline computed a wrong result");
    };
    cleanups.push(() => {
      kernel.release();
      program.release();
    });
    return [rawBody, memlifeBody];
  }

  // What a destructor callback adds is a difference between cases: measure the 4 KiB buffer with
  // 0, 1 and 4 callbacks together, round-robin, so that load changes do not land in the difference.
  const together = (spec: CaseSpec) => (spec.kind === "create" || spec.kind === "callbacks") && spec.bytes === 4096;
  await bench(items.filter((item) => together(item.spec)));
  for (const item of items) if (!together(item.spec)) await bench([item]);
  for (const cleanup of cleanups) cleanup();
  queue.release();
  ctx.release();
}

// ---- Embree -------------------------------------------------------------------------------------

/** The slice of memlife's Embree API these cases use (src/embree, read structurally). */
interface RtcScene {
  addTriangleMesh(vertices: Float32Array, indices: Uint32Array): unknown;
  commit(): Promise<void>;
  release(): void;
}
interface RtcDevice {
  newScene(): RtcScene;
  /** memlife's accounting: `calls` counts every monitor call the device made. */
  readonly memory?: { readonly calls: number };
  setMemoryMonitorFunction(fn: ((bytes: number, post: boolean) => boolean) | null): void;
  setMemoryBudget?(bytes: number): void;
  release(): void;
}
interface Rtc {
  newDevice(config?: string): RtcDevice;
}

/** Opens Embree like memlife does (4 preferred over 3) and keeps it loaded until exit (DESIGN.md). */
function openEmbree() {
  const override = process.env.EMBREE_LIBRARY;
  const candidates = override ? [override] : ["libembree4.so.4", "libembree3.so.3"];
  const libc = backend.open("libc.so.6", libcSymbols).symbols;
  const errors: string[] = [];
  for (const path of candidates) {
    try {
      // Deno and Node crash at exit if Embree is unloaded while TBB threads run: pin it first.
      libc.dlopen(path, RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE);
      return backend.open(path, embreeSymbols);
    } catch (error) {
      errors.push(`${path}: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  throw new Error(`no Embree library (${errors.join("; ")})`);
}

async function embreeBenchmarks(): Promise<void> {
  const specs = embreeCases(triangles).filter((s) => matches(s, filter));
  if (specs.length === 0) return;
  const rtc = (memlife as unknown as { rtc?: Rtc }).rtc;
  let lib: ReturnType<typeof openEmbree>;
  try {
    lib = openEmbree();
  } catch (error) {
    unavailableAll(specs, error instanceof Error ? error.message : String(error));
    return;
  }
  const e = lib.symbols;
  // Every Embree device of the run (C's too: bench/baseline.c reads it) gets this configuration,
  // e.g. "threads=15": to see what the TBB workers' count does to a JS monitor's round trips.
  const embreeConfig = process.env.MEMLIFE_BENCH_EMBREE_CONFIG ?? "";
  emit({ type: "info", runtime, version, embree: embreeConfig === "" ? lib.path : `${lib.path} ("${embreeConfig}")` });

  /** Per-device counters; a raw monitor finds its device's by the `user_data` id. */
  interface Counters {
    live: number;
    calls: number;
    builds: number;
  }
  const counters: Counters[] = [];
  const rawMonitor = (budgeted: boolean) =>
    backend.callback(embreeCallbacks.memoryMonitor, (id: number, bytes: number | bigint, post: boolean) => {
      const c = counters[id];
      c.calls++;
      const b = Number(bytes);
      // The budget refuses like memlife's does: an allocation that would go over it.
      if (budgeted && b > 0 && !post && c.live + b > budget) return false;
      c.live += b;
      return true;
    });
  const countingMonitor = rawMonitor(false);
  const budgetMonitor = rawMonitor(true);
  const perBuild = (c: Counters) => () => ({ monitorCalls: c.builds > 0 ? Math.round(c.calls / c.builds) : 0 });

  // The variants of one scene size are measured together, build by build (MeasureOptions.interleave):
  // the monitor and budget targets compare them.
  for (const n of triangles) {
    const sized = specs.filter((spec) => spec.triangles === n);
    if (sized.length === 0) continue;
    const { vertices, indices } = mesh(n);
    const cleanup: (() => void)[] = [];
    const items = sized.map((spec) => ({
      spec,
      impls: spec.impls.map((impl): Impl => {
        const c: Counters = { live: 0, calls: 0, builds: 0 };
        if (impl === "memlife") {
          if (rtc === undefined) {
            return { impl, body: "src/mod.ts exports no `rtc` yet (memlife's Embree API is not written)" };
          }
          let device: RtcDevice;
          try {
            device = rtc.newDevice(embreeConfig);
            cleanup.push(() => device.release());
            if (spec.monitor === "js") {
              device.setMemoryMonitorFunction((bytes) => {
                c.calls++;
                c.live += bytes;
                return true;
              });
            } else if (spec.monitor === "budget") {
              if (typeof device.setMemoryBudget !== "function") {
                return { impl, body: "rtc.Device has no setMemoryBudget yet" };
              }
              device.setMemoryBudget(budget);
            }
          } catch (error) {
            return { impl, body: `error: ${error instanceof Error ? error.message : String(error)}` };
          }
          const body: Body = async (count) => {
            let ns = 0;
            for (let i = 0; i < count; i++) {
              const scene = device.newScene();
              scene.addTriangleMesh(vertices, indices);
              const start = performance.now();
              await scene.commit();
              ns += (performance.now() - start) * 1e6;
              scene.release();
              c.builds++;
            }
            return ns;
          };
          // memlife's own count of native monitor calls: 0 on the "none" device, which has no monitor.
          const stats = () => ({
            monitorCalls: c.builds > 0 ? Math.round((device.memory?.calls ?? c.calls) / c.builds) : 0,
          });
          return { impl, body, perOp: stats };
        }

        // The raw floor: the calls bench/baseline.c makes, through this runtime's bindings.
        const device = e.rtcNewDevice(embreeConfig);
        if (device === null) return { impl, body: "rtcNewDevice returned NULL" };
        cleanup.push(() => e.rtcReleaseDevice(device));
        counters.push(c);
        if (spec.monitor !== "none") {
          e.rtcSetDeviceMemoryMonitorFunction(
            device,
            spec.monitor === "js" ? countingMonitor : budgetMonitor,
            counters.length - 1,
          );
        }
        const sync = impl === "raw sync";
        const body: Body = async (count) => {
          let ns = 0;
          for (let i = 0; i < count; i++) {
            const scene = e.rtcNewScene(device);
            if (scene === null) throw new Error("rtcNewScene returned NULL");
            rawTriangleMesh(e, device, scene, { vertices, indices });
            const start = performance.now();
            if (sync) e.rtcCommitScene(scene);
            else await lib.async.rtcCommitScene(scene);
            ns += (performance.now() - start) * 1e6;
            await lib.async.rtcReleaseScene(scene);
            c.builds++;
          }
          return ns;
        };
        return { impl, body, perOp: spec.monitor === "none" ? undefined : perBuild(c) };
      }),
    }));
    await bench(items, { ...method, interleave: true });
    for (const release of cleanup) release();
  }
}

// ---- main ---------------------------------------------------------------------------------------

if (group === "all" || group === "opencl") await openclBenchmarks();
if (group === "all" || group === "embree") await embreeBenchmarks();
