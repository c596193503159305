/**
 * The memlife side of test/differential.spec.ts: the script of test/differential/probe.c, call for
 * call, through memlife's public API, printing the same observations ({"k": key, "v": value}, one
 * JSON line each). A memlife error becomes {"code","fn"} (OpenCLError, EmbreeError) or
 * {"throws": name} (TypeError, RangeError, ReleasedError: refused before any native call).
 */
import process from "node:process";
import { setTimeout as sleep } from "node:timers/promises";
import { cl, EmbreeError, OpenCLError, rtc } from "../../src/mod.ts";

type Value = unknown;

function put(k: string, v: Value): void {
  process.stdout.write(JSON.stringify({ k, v }) + "\n");
}

function failure(error: unknown): Value {
  if (error instanceof OpenCLError || error instanceof EmbreeError) return { code: error.code, fn: error.fn };
  if (error instanceof Error) return { throws: error.name, message: error.message };
  return { throws: String(error) };
}

/** Runs `fn` and records `{ ok: true, ...extra }`, or what it threw. Returns its result, if any. */
function observe<T>(k: string, fn: () => T, extra?: (result: T) => Record<string, unknown>): T | undefined {
  try {
    const result = fn();
    put(k, { ok: true, ...extra?.(result) });
    return result;
  } catch (error) {
    put(k, failure(error));
    return undefined;
  }
}

async function observeAsync(k: string, fn: () => Promise<unknown>): Promise<void> {
  try {
    await fn();
    put(k, { ok: true });
  } catch (error) {
    put(k, failure(error));
  }
}

async function opencl(): Promise<void> {
  const platforms = cl.getPlatforms();
  put("cl.platforms.count", platforms.length);
  if (platforms.length === 0) return;
  const platform = platforms[0];
  put("cl.platform.name", platform.name);
  put("cl.platform.vendor", platform.vendor);
  put("cl.platform.version", platform.version);
  put("cl.platform.profile", platform.profile);
  put("cl.platform.extensions", platform.extensions);

  const T = cl.DeviceType;
  const types: [string, number][] = [
    ["DEFAULT", T.DEFAULT],
    ["CPU", T.CPU],
    ["GPU", T.GPU],
    ["ACCELERATOR", T.ACCELERATOR],
    ["CUSTOM", T.CUSTOM],
    ["ALL", T.ALL],
    ["CPU|GPU", T.CPU | T.GPU],
    ["0x40", 0x40],
    ["0", 0],
    ["2^32|CPU", 2 ** 32 + T.CPU],
    ["2^40", 2 ** 40],
  ];
  for (const [name, type] of types) {
    try {
      put(`cl.getDeviceIDs.${name}`, { devices: platform.getDevices(type).map((d) => d.name) });
    } catch (error) {
      put(`cl.getDeviceIDs.${name}`, failure(error));
    }
  }

  const device = platform.getDevices()[0];
  put("cl.device.name", device.name);
  put("cl.device.vendor", device.vendor);
  put("cl.device.version", device.version);
  put("cl.device.driverVersion", device.driverVersion);
  put("cl.device.typeMask", device.typeMask);
  put("cl.device.globalMemSize", device.globalMemSize);
  put("cl.device.maxMemAllocSize", device.maxMemAllocSize);
  put("cl.device.maxComputeUnits", device.maxComputeUnits);
  put("cl.device.svm", { ...device.svm });

  const ctx = cl.createContext([device]);
  const other = cl.createContext([device]);
  put("cl.context.referenceCount", ctx.referenceCount);
  const queue = ctx.createCommandQueue();
  queue.retain();
  put("cl.queue.referenceCountAfterRetain", queue.referenceCount);
  queue.release();

  observe("cl.createBuffer.size0", () => ctx.createBuffer(0));
  observe("cl.createBuffer.overMaxAlloc", () => ctx.createBuffer(device.maxMemAllocSize + 1));
  observe("cl.createBuffer.useHostPtrWithoutData", () => ctx.createBuffer(64, { hostPtr: "use" }));
  // memlife's `access` names one flag; "read_only|write_only" is the nearest a program can get to both.
  observe(
    "cl.createBuffer.readOnlyAndWriteOnly",
    () => ctx.createBuffer(64, { access: "read_only|write_only" as cl.Access }),
  );
  const released = cl.createContext([device]);
  released.release();
  observe("cl.createBuffer.invalidContext", () => released.createBuffer(64));
  const host = new Float32Array(16);
  const used = ctx.createBuffer(host, { hostPtr: "use" });
  put("cl.buffer.useHostPtr.flags", used.flags);
  put("cl.buffer.useHostPtr.hasHostPointer", used.hostPointer !== 0n);
  used.release();
  for (
    const [key, options] of [
      ["cl.buffer.copyHostPtr.flags", { hostPtr: "copy" }],
      ["cl.buffer.allocHostPtr.flags", { hostPtr: "alloc" }],
      ["cl.buffer.readOnly.flags", { access: "read_only" }],
    ] as const
  ) {
    const made = ctx.createBuffer(host, options);
    put(key, made.flags);
    made.release();
  }

  const buf = ctx.createBuffer(1024);
  observe("cl.setDestructorCallback.null", () => buf.setDestructorCallback(null as unknown as cl.DestructorCallback));
  buf.retain();
  put("cl.buffer.referenceCountAfterRetain", buf.referenceCount);
  buf.release();
  const order: number[] = [];
  for (const n of [1, 2, 3]) buf.setDestructorCallback(() => order.push(n));
  const destroyed = buf.destroyed;
  buf.release();
  await destroyed;
  put("cl.destructorOrder", order);

  const mem = ctx.createBuffer(64);
  const bytes = new Uint8Array(64);
  for (
    const [what, enqueue] of [
      ["write", () => queue.enqueueWriteBuffer(mem, bytes)],
      ["read", () => queue.enqueueReadBuffer(mem, bytes)],
    ] as const
  ) {
    const event = observe(`cl.${what}.enqueue`, enqueue);
    if (event === undefined) continue;
    put(`cl.${what}.commandType`, event.commandType);
    await observeAsync(`cl.${what}.wait`, () => event.wait());
    put(`cl.${what}.status`, event.status);
    event.release();
  }
  for (let i = 0; i < 64; i++) bytes[i] = i * 3;
  await queue.writeBuffer(mem, bytes);
  put("cl.read.dataAtOffset16", [...await queue.readBuffer(mem, new Uint8Array(16), { offset: 16 })]);
  // An empty typed array: C passes a valid pointer and size 0.
  for (
    const [what, enqueue] of [
      ["write", () => queue.enqueueWriteBuffer(mem, new Uint8Array(0))],
      ["read", () => queue.enqueueReadBuffer(mem, new Uint8Array(0))],
    ] as const
  ) {
    const event = observe(`cl.${what}.size0`, enqueue);
    if (event !== undefined) {
      await event.wait().catch(() => {});
      event.release();
    }
  }
  const atEnd = observe("cl.read.size0AtEnd", () => queue.enqueueReadBuffer(mem, new Uint8Array(0), { offset: 64 }));
  if (atEnd !== undefined) {
    await atEnd.wait().catch(() => {});
    atEnd.release();
  }
  observe("cl.write.outOfBounds", () => queue.enqueueWriteBuffer(mem, bytes, { offset: 32 }));
  observe(
    "cl.write.waitListNull",
    () => queue.enqueueWriteBuffer(mem, bytes, { waitFor: [null as unknown as cl.Event] }),
  );
  const foreign = other.createUserEvent();
  observe("cl.write.waitListOtherContext", () => queue.enqueueWriteBuffer(mem, bytes, { waitFor: [foreign] }));
  foreign.setStatus(0);
  foreign.release();
  put("cl.context.referenceCountWithChildren", ctx.referenceCount);

  let user = ctx.createUserEvent();
  put("cl.userEvent.commandType", user.commandType);
  put("cl.userEvent.initialStatus", user.status);
  observe("cl.userEvent.setStatus(1)", () => user.setStatus(1));
  observe("cl.userEvent.setStatus(2)", () => user.setStatus(cl.ExecutionStatus.SUBMITTED));
  const waiting = observe(
    "cl.userEvent.dependentWrite.enqueue",
    () => queue.enqueueWriteBuffer(mem, bytes, { waitFor: [user] }),
  );
  observe("cl.userEvent.setStatus(-5)", () => user.setStatus(-5));
  put("cl.userEvent.statusAfterFailure", user.status);
  observe("cl.userEvent.setStatusAgain", () => user.setStatus(0));
  if (waiting !== undefined) {
    await observeAsync("cl.userEvent.dependentWrite.wait", () => waiting.wait());
    put("cl.userEvent.dependentWrite.status", waiting.status);
    await observeAsync("cl.userEvent.waitFailed", () => user.wait());
    await observeAsync("cl.userEvent.finishAfterFailure", () => queue.finish());
    waiting.release();
  }
  user.release();
  user = ctx.createUserEvent();
  observe("cl.userEvent.setStatus(-2^32)", () => user.setStatus(-(2 ** 32)));
  put("cl.userEvent.setStatus(-2^32).status", user.status);
  try {
    user.setStatus(0);
  } catch {
    // already set by the wrapped call above
  }
  user.release();
  await queue.finish();

  // A buffer released while an enqueued command still uses it: destroyed once the command ran.
  let gate = ctx.createUserEvent();
  const pending = ctx.createBuffer(64);
  const pendingOrder: number[] = [];
  for (const n of [1, 2]) pending.setDestructorCallback(() => pendingOrder.push(n));
  const pendingDestroyed = pending.destroyed;
  const gated = queue.enqueueWriteBuffer(pending, bytes, { waitFor: [gate] });
  pending.release();
  await sleep(50);
  const callsBeforeCommand = pendingOrder.length;
  gate.setStatus(0);
  await gated.wait();
  await queue.finish();
  await Promise.race([pendingDestroyed, sleep(5000)]);
  put("cl.destructor.pendingCommand", { callsBeforeCommand, callsAfter: pendingOrder.length, order: pendingOrder });
  gated.release();
  gate.release();

  mem.release();

  if (device.svm.coarseGrainBuffer) {
    const svm = (k: string, size: number, options: cl.SVMOptions) => {
      const alignment = options.alignment ?? 0;
      const a = observe(
        k,
        () => ctx.svmAlloc(size, options),
        (a) => ({ aligned: alignment === 0 || a.address % BigInt(alignment) === 0n }),
      );
      a?.release();
    };
    svm("cl.svmAlloc.plain", 4096, {});
    svm("cl.svmAlloc.align4096", 4096, { alignment: 4096 });
    svm("cl.svmAlloc.align3", 4096, { alignment: 3 });
    svm("cl.svmAlloc.size0", 0, {});
    svm("cl.svmAlloc.overMaxAlloc", device.maxMemAllocSize + 1, {});
    svm("cl.svmAlloc.fineGrain", 4096, { fineGrain: true });
    svm("cl.svmAlloc.fineGrainAtomics", 4096, { fineGrain: true, atomics: true });
    svm("cl.svmAlloc.atomicsWithoutFineGrain", 4096, { atomics: true });
    svm("cl.svmAlloc.align2^32", 4096, { alignment: 2 ** 32 });

    const given = Array.from({ length: 32 }, () => ctx.svmAlloc(256));
    const seen = { calls: 0, count: -1, order: [] as number[] };
    const onFree = (_q: cl.CommandQueue, list: cl.SVMAllocation[]) => {
      seen.calls++;
      seen.count = list.length;
      seen.order = list.map((a) => given.indexOf(a));
    };
    const event = observe("cl.svmFree.enqueue", () => queue.enqueueSVMFree(given, { onFree }));
    if (event !== undefined) {
      put("cl.svmFree.commandType", event.commandType);
      await observeAsync("cl.svmFree.wait", () => event.wait());
      await queue.finish();
      put("cl.svmFree.status", event.status);
      event.release();
      put("cl.svmFree.callback", seen);
    }
    // A free that waits for a user event: its callback comes after the event completed.
    const pair = [ctx.svmAlloc(256), ctx.svmAlloc(256)];
    const waited = { calls: 0, order: [] as number[] };
    gate = ctx.createUserEvent();
    const freeEvent = observe("cl.svmFree.waitFor.enqueue", () =>
      queue.enqueueSVMFree(pair, {
        waitFor: [gate],
        onFree: (_q, list) => {
          waited.calls++;
          waited.order = list.map((a) => pair.indexOf(a));
        },
      }));
    if (freeEvent !== undefined) {
      await sleep(50);
      const callsBeforeEvent = waited.calls;
      gate.setStatus(0);
      await observeAsync("cl.svmFree.waitFor.wait", () => freeEvent.wait());
      put("cl.svmFree.waitFor.callback", { callsBeforeEvent, callsAfterWait: waited.calls, order: waited.order });
      await queue.finish();
      freeEvent.release();
    }
    gate.release();

    const empty = { calls: 0, count: -1 };
    const emptyEvent = observe("cl.svmFree.empty.enqueue", () =>
      queue.enqueueSVMFree([], {
        onFree: (_q, list) => {
          empty.calls++;
          empty.count = list.length;
        },
      }));
    if (emptyEvent !== undefined) {
      await observeAsync("cl.svmFree.empty.wait", () => emptyEvent.wait());
      await queue.finish();
      emptyEvent.release();
      put("cl.svmFree.empty.callback", empty);
    }
  }
  await programs(ctx, queue, device);
  await values(ctx, queue);
  queue.release();
  other.release();
  ctx.release();
}

/** probe.c's program: a struct, a __local and a __constant argument, a required work-group size. */
const programSource = `// UTF-8 in a comment: \u03c0 \u2248 3.14159, \u{1F600}
typedef struct { int a; float b; } pair;
__kernel __attribute__((reqd_work_group_size(4, 1, 1)))
void scale(__global float *x, const float k, __local int *scratch, __constant uint4 *table, pair p) {
  size_t i = get_global_id(0);
  scratch[get_local_id(0)] = (int)i;
  x[i] = x[i] * k + (float)table[0].x + p.b;
}
__kernel void add(__global const int *a, __global const int *b, __global int *c) {
  size_t i = get_global_id(0);
  c[i] = a[i] + b[i];
}
`;

/** Records `get()`, or what it threw. */
function value(k: string, get: () => unknown): void {
  try {
    put(k, get());
  } catch (error) {
    put(k, failure(error));
  }
}

/** An enqueue's outcome, then its event's command type and status after the wait. */
async function command(prefix: string, enqueue: () => cl.Event): Promise<void> {
  const event = observe(`${prefix}.enqueue`, enqueue);
  if (event === undefined) return;
  put(`${prefix}.commandType`, event.commandType);
  await observeAsync(`${prefix}.wait`, () => event.wait());
  put(`${prefix}.status`, event.status);
  event.release();
}

/** An enqueue that should fail: its outcome only. */
async function refused(k: string, enqueue: () => cl.Event): Promise<void> {
  const event = observe(k, enqueue);
  if (event !== undefined) {
    await event.wait().catch(() => {});
    event.release();
  }
}

function workGroup(prefix: string, kernel: cl.Kernel): void {
  put(`${prefix}.workGroupSize`, kernel.workGroupSize());
  put(`${prefix}.preferredWorkGroupSizeMultiple`, kernel.preferredWorkGroupSizeMultiple());
  put(`${prefix}.localMemSize`, kernel.localMemSize());
  put(`${prefix}.compileWorkGroupSize`, kernel.compileWorkGroupSize());
}

/** probe.c's echo kernels: each stores its by-value argument, as the kernel saw the bytes setArg gave. */
const echoSource = `#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#define E(T) __kernel void echo_##T(__global T *o, T v) { o[0] = v; }
E(char) E(uchar) E(short) E(ushort) E(int) E(uint) E(long) E(ulong) E(float) E(double)
E(int3) E(float3) E(char16) E(long2) E(ushort8) E(double4)
`;

async function values(ctx: cl.Context, queue: cl.CommandQueue): Promise<void> {
  const program = ctx.createProgram(echoSource);
  let built = true;
  await observeAsync("cl.values.build", () => program.build().catch((e) => (built = false, Promise.reject(e))));
  if (!built) return program.release();
  const cases: [string, cl.TypedValue][] = [
    ["char", cl.char(-128)],
    ["uchar", cl.uchar(255)],
    ["short", cl.short(-32768)],
    ["ushort", cl.ushort(65535)],
    ["int", cl.int(-(2 ** 31))],
    ["uint", cl.uint(2 ** 32 - 1)],
    ["long", cl.long(-(2n ** 63n))],
    ["ulong", cl.ulong(2n ** 64n - 1n)],
    ["float", cl.float(-3.4028234663852886e38)],
    ["double", cl.double(1 / 3)],
    ["int3", cl.int3(1, -2, 3)],
    ["float3", cl.float3(1.5, -2.5, 0.1)],
    ["char16", cl.char16(...Array.from({ length: 16 }, (_, j) => j * 17 - 128))],
    ["long2", cl.long2(9007199254740993n, -1)],
    ["ushort8", cl.ushort8(...Array.from({ length: 8 }, (_, j) => j * 9000))],
    ["double4", cl.double4(0.1, -0, 1e300, 5e-324)],
  ];
  for (const [type, value] of cases) {
    const kernel = program.createKernel(`echo_${type}`);
    const out = ctx.createBuffer(new Uint8Array(128).fill(0xaa));
    try {
      kernel.setArg(0, out).setArg(1, value);
      const event = queue.enqueueNDRangeKernel(kernel, [1]);
      await event.wait();
      event.release();
      const bytes = await queue.readBuffer(out, new Uint8Array(128));
      let n = bytes.length;
      while (n > 0 && bytes[n - 1] === 0xaa) n--;
      put(`cl.values.${type}`, [...bytes.subarray(0, n)]);
    } catch (error) {
      put(`cl.values.${type}`, failure(error));
    }
    out.release();
    kernel.release();
  }
  program.release();
}

async function programs(ctx: cl.Context, queue: cl.CommandQueue, device: cl.Device): Promise<void> {
  put("cl.device.localMemSize", device.localMemSize);
  const program = observe("cl.program.create", () => ctx.createProgram(programSource))!;
  put("cl.program.source", program.source);
  value("cl.program.buildStatusBefore", () => program.buildStatus());
  value("cl.program.kernelNamesBeforeBuild", () => program.kernelNames);
  value("cl.program.numKernelsBeforeBuild", () => program.numKernels);
  observe("cl.program.createKernelBeforeBuild", () => program.createKernel("add"));
  await observeAsync("cl.program.build", () => program.build());
  value("cl.program.buildStatus", () => program.buildStatus());
  value("cl.program.buildLog", () => program.buildLog());
  value("cl.program.kernelNames", () => program.kernelNames);
  value("cl.program.numKernels", () => program.numKernels);
  observe("cl.program.createKernel(nope)", () => program.createKernel("nope"));

  const scale = program.createKernel("scale");
  const add = program.createKernel("add");
  for (const [name, kernel] of [["scale", scale], ["add", add]] as const) {
    put(`cl.kernel.${name}.name`, kernel.name);
    put(`cl.kernel.${name}.numArgs`, kernel.numArgs);
    for (let i = 0; i < kernel.numArgs; i++) value(`cl.kernel.${name}.argInfo(${i})`, () => kernel.argInfo(i));
    workGroup(`cl.kernel.${name}`, kernel);
  }
  // OpenCL rebuilds no program with kernels attached.
  await observeAsync("cl.program.rebuildWithKernels", () => program.build());
  value("cl.program.buildStatusAfterRefusedRebuild", () => program.buildStatus());
  const all = program.createKernels();
  put("cl.program.createKernels", all.map((k) => k.name));
  for (const k of all) k.release();

  const a = Int32Array.from({ length: 16 }, (_, i) => i);
  const b = Int32Array.from({ length: 16 }, (_, i) => 100 * i);
  const c = new Int32Array(16);
  const ma = ctx.createBuffer(a, { access: "read_only" });
  const mb = ctx.createBuffer(b, { access: "read_only" });
  const mc = ctx.createBuffer(c.byteLength);
  put("cl.buffer.plain.size", mc.size);
  put("cl.buffer.plain.flags", mc.flags);
  await refused("cl.ndrange.argsNotSet", () => queue.enqueueNDRangeKernel(add, [16]));
  add.setArg(0, ma).setArg(1, mb).setArg(2, mc);
  await command("cl.ndrange.add", () => queue.enqueueNDRangeKernel(add, [16]));
  put("cl.ndrange.add.result", [...await queue.readBuffer(mc, new Int32Array(16))]);
  await queue.writeBuffer(mc, new Int32Array(16).fill(-1));
  await command("cl.ndrange.addOffset", () => queue.enqueueNDRangeKernel(add, [8], { offset: [4], local: [4] }));
  put("cl.ndrange.addOffset.result", [...await queue.readBuffer(mc, new Int32Array(16))]);
  const mx = ctx.createBuffer(16 * 4);
  const mt = ctx.createBuffer(new Uint32Array([1, 2, 3, 4]), { access: "read_only" });
  const pair = new DataView(new ArrayBuffer(8));
  pair.setInt32(0, 7, true);
  pair.setFloat32(4, 0.5, true);
  scale.setArg(0, mx).setArg(1, cl.float(2)).setArg(2, cl.local(16)).setArg(3, mt).setArg(4, pair);
  await refused("cl.ndrange.wrongLocal", () => queue.enqueueNDRangeKernel(scale, [16], { local: [8] }));
  await queue.writeBuffer(mx, Float32Array.from({ length: 16 }, (_, i) => i));
  await command("cl.ndrange.scale", () => queue.enqueueNDRangeKernel(scale, [16], { local: [4] }));
  put("cl.ndrange.scale.result", [...await queue.readBuffer(mx, new Float32Array(16))]);
  workGroup("cl.kernel.scaleAfterArgs", scale);

  await command("cl.copy", () => queue.enqueueCopyBuffer(ma, mc, { size: a.byteLength }));
  await refused("cl.copy.overlap", () => queue.enqueueCopyBuffer(mc, mc, { srcOffset: 0, dstOffset: 8, size: 16 }));
  await command(
    "cl.copy.sameBufferApart",
    () => queue.enqueueCopyBuffer(mc, mc, { srcOffset: 0, dstOffset: 32, size: 32 }),
  );
  put("cl.copy.result", [...await queue.readBuffer(mc, new Int32Array(16))]);
  await command("cl.fill", () => queue.enqueueFillBuffer(mc, cl.int(0x01020304), { offset: 8, size: 16 }));
  put("cl.fill.result", [...await queue.readBuffer(mc, new Int32Array(16))]);
  await command("cl.marker", () => queue.enqueueMarker());
  await command("cl.barrier", () => queue.enqueueBarrier());

  if (device.svm.coarseGrainBuffer) {
    const svm = ctx.svmAlloc(64);
    await command("cl.svmMemFill", () => queue.enqueueSVMMemFill(svm, cl.int(0x01020304)));
    await command("cl.svmMemcpy", () => queue.enqueueSVMMemcpy(svm, a, { size: 32 }));
    let mapping: cl.SVMMapping | undefined;
    await command("cl.svmMap", () => (mapping = queue.enqueueSVMMap(svm)).event);
    put("cl.svmMap.contents", [...new Int32Array(mapping!.arrayBuffer)]);
    await command("cl.svmUnmap", () => mapping!.unmap());
    await queue.finish();
    svm.release();
  }

  const broken = ctx.createProgram("__kernel void broken(__global int *x) { x[0] = undeclared; }\n");
  await observeAsync("cl.program.broken.build", () => broken.build());
  value("cl.program.broken.buildStatus", () => broken.buildStatus());
  put("cl.program.broken.buildLogMentions", broken.buildLog().includes("undeclared"));
  // The whole log, but for the name of PoCL's temporary file, new in each build, and for clang's
  // "stack nearly exhausted" warning, which PoCL's clang gives at random on a build that runs off
  // the main thread (1 run in 3 or 4 on Node, never in C, which builds on its main thread; not
  // looked into: possibly LLVM's bottom-of-stack mark taken on another thread).
  put(
    "cl.program.broken.buildLog",
    broken.buildLog().replace(/tempfile_[A-Za-z0-9]*/g, "tempfile_*").replace(
      /^warning: .*stack nearly exhausted.*\n/gm,
      "",
    ),
  );
  value("cl.program.broken.kernelNames", () => broken.kernelNames);
  observe("cl.program.broken.createKernels", () => broken.createKernels());
  broken.release();
  const badOptions = ctx.createProgram(programSource);
  await observeAsync("cl.program.badOptions.build", () => badOptions.build("-cl-std=CL9.9"));
  value("cl.program.badOptions.buildStatus", () => badOptions.buildStatus());
  badOptions.release();

  // A command behind a user event: its status before and after, a marker behind it.
  const gate = ctx.createUserEvent();
  const gated = queue.enqueueWriteBuffer(mc, a, { waitFor: [gate] });
  put("cl.gated.write.statusBefore", gated.status);
  queue.flush();
  put("cl.gated.write.statusAfterFlush", gated.status);
  const marker = queue.enqueueMarker({ waitFor: [gated] });
  put("cl.gated.marker.statusBefore", marker.status);
  gate.setStatus(0);
  await observeAsync("cl.gated.marker.wait", () => marker.wait());
  put("cl.gated.write.status", gated.status);
  put("cl.gated.marker.status", marker.status);
  for (const e of [marker, gated, gate]) e.release();
  // One device given twice: OpenCL counts it once.
  const dup = cl.createContext([device, device]);
  put("cl.context.deviceGivenTwice.devices", dup.devices.length);
  dup.release();

  for (const x of [ma, mb, mc, mx, mt]) x.release();
  scale.release();
  add.release();
  program.release();
}

/** The 8x8 grid of quads of probe.c, two triangles each. */
const GRID = 8;
const vertices = new Float32Array((GRID + 1) * (GRID + 1) * 3);
const indices = new Uint32Array(GRID * GRID * 6);
for (let y = 0, v = 0; y <= GRID; y++) for (let x = 0; x <= GRID; x++, v++) vertices.set([x, y, 0], 3 * v);
for (let y = 0, i = 0; y < GRID; y++) {
  for (let x = 0; x < GRID; x++, i += 6) {
    const a = y * (GRID + 1) + x, b = a + 1, c = a + GRID + 1, d = c + 1;
    indices.set([a, b, c, b, d, c], i);
  }
}

async function monitoredRun(
  prefix: string,
  refusePhase: string | null,
  order: "sceneFirst" | "deviceFirst" | "sceneRetained" = "sceneFirst",
): Promise<void> {
  let phase = "";
  let refused = false;
  let sum = 0;
  const calls: [string, number, boolean][] = [];
  const device = rtc.newDevice("threads=1");
  device.setMemoryMonitorFunction((bytes, post) => {
    const refuse = bytes > 0 && !post && !refused && phase === refusePhase;
    if (refuse) refused = true;
    if (!refuse || post || bytes <= 0) sum += bytes;
    calls.push([phase, bytes, post]);
    return !refuse;
  });
  phase = "newScene";
  const scene = device.newScene();
  phase = "addTriangleMesh";
  observe(`${prefix}.addTriangleMesh`, () => scene.addTriangleMesh(vertices, indices));
  phase = "commit";
  await observeAsync(`${prefix}.commit`, () => scene.commit());
  if (refusePhase === "commit") {
    phase = "intersect1";
    value(
      `${prefix}.afterFailedCommit`,
      () => scene.intersect1({ origin: [2.25, 3.5, -1], direction: [0, 0, 1] }),
    );
  }
  if (refusePhase === null) {
    phase = "intersect1";
    const rays: [string, rtc.Ray][] = [
      ["hit", { origin: [2.25, 3.5, -1], direction: [0, 0, 1] }],
      ["backface", { origin: [0.7, 0.2, 5], direction: [0, 0, -2] }],
      ["miss", { origin: [20, 20, -1], direction: [0, 0, 1] }],
      ["tooShort", { origin: [2.25, 3.5, -1], direction: [0, 0, 1], tfar: 0.5 }],
      ["mask0", { origin: [2.25, 3.5, -1], direction: [0, 0, 1], mask: 0 }],
    ];
    for (const [name, ray] of rays) put(`${prefix}.ray.${name}`, scene.intersect1(ray));
  }
  if (order === "deviceFirst") {
    phase = "releaseDevice";
    device.release();
  }
  if (order === "sceneRetained") {
    scene.retain();
    phase = "releaseRetainedScene";
    scene.release();
  }
  phase = "releaseScene";
  scene.release();
  if (order !== "deviceFirst") {
    phase = "releaseDevice";
    device.release();
  }
  put(`${prefix}.monitor`, { calls, sum });
  put(`${prefix}.memory`, { ...device.memory });
}

/** probe.c's scenes(): two meshes in one scene, and rays at a quad's triangles, edges and vertices. */
async function scenes(): Promise<void> {
  const device = rtc.newDevice("threads=1");
  const empty = device.newScene();
  await observeAsync("rtc.scenes.empty.commit", () => empty.commit());
  put("rtc.scenes.empty.ray", empty.intersect1({ origin: [1, 1, -1], direction: [0, 0, 1] }));
  empty.release();
  const scene = device.newScene();
  observe("rtc.scenes.first", () => scene.addTriangleMesh(vertices, indices));
  value(
    "rtc.scenes.secondGeomID",
    () => scene.addTriangleMesh(new Float32Array([0, 0, 2, 0, 4, 2, 4, 0, 2]), new Uint32Array([0, 1, 2])),
  );
  // Triangles Embree leaves out of the build: a NaN vertex, an infinite one, a degenerate one.
  value("rtc.scenes.oddGeomID", () =>
    scene.addTriangleMesh(
      new Float32Array([
        20,
        0,
        0,
        21,
        0,
        0,
        20,
        1,
        0,
        22,
        0,
        0,
        NaN,
        0,
        0,
        22,
        1,
        0,
        24,
        0,
        0,
        Infinity,
        0,
        0,
        24,
        1,
        0,
        26,
        0,
        0,
        27,
        0,
        0,
        28,
        0,
        0,
      ]),
      Uint32Array.from({ length: 12 }, (_, i) => i),
    ));
  await observeAsync("rtc.scenes.commit", () => scene.commit());
  const rays: [string, rtc.Ray][] = [
    ["fromAbove", { origin: [1, 1, 5], direction: [0, 0, -1] }],
    ["fromBelow", { origin: [1, 1, -1], direction: [0, 0, 1] }],
    ["pastFirst", { origin: [1, 1, -1], direction: [0, 0, 1], tnear: 1.5 }],
    ["secondOnly", { origin: [6, 0.5, 5], direction: [0, 0, -1] }],
    ["quadFirst", { origin: [5.2, 6.3, -1], direction: [0, 0, 1] }],
    ["quadSecond", { origin: [5.8, 6.7, -1], direction: [0, 0, 1] }],
    ["diagonal", { origin: [5.5, 6.5, -1], direction: [0, 0, 1] }],
    ["vertex", { origin: [3, 3, -1], direction: [0, 0, 1] }],
    ["corner", { origin: [0, 0, -1], direction: [0, 0, 1] }],
    ["farCorner", { origin: [8, 8, -1], direction: [0, 0, 1] }],
    ["oblique", { origin: [1, 1, -2], direction: [0.5, 0.25, 1] }],
    ["scaled", { origin: [7.1, 2.9, -1], direction: [0, 0, 4] }],
    ["tnearBefore", { origin: [7.1, 2.9, -1], direction: [0, 0, 1], tnear: 0.5 }],
    ["tnearAtHit", { origin: [7.1, 2.9, -1], direction: [0, 0, 1], tnear: 1 }],
    ["tfarAtHit", { origin: [7.1, 2.9, -1], direction: [0, 0, 1], tfar: 1 }],
    ["negativeTfar", { origin: [7.1, 2.9, -1], direction: [0, 0, 1], tfar: -1 }],
    ["time1", { origin: [7.1, 2.9, -1], direction: [0, 0, 1], time: 1 }],
    ["mask1", { origin: [7.1, 2.9, -1], direction: [0, 0, 1], mask: 1 }],
    ["parallel", { origin: [1, 1, 0], direction: [1, 0, 0] }],
    ["grazing", { origin: [-1, 4.5, 1], direction: [1, 0, -0.125] }],
    ["outside", { origin: [8.5, 4, -1], direction: [0, 0, 1] }],
    ["zeroDirection", { origin: [1, 1, -1], direction: [0, 0, 0] }],
    ["goodOfOdd", { origin: [20.2, 0.2, -1], direction: [0, 0, 1] }],
    ["nanVertex", { origin: [22.1, 0.2, -1], direction: [0, 0, 1] }],
    ["infiniteVertex", { origin: [24.1, 0.2, -1], direction: [0, 0, 1] }],
    ["degenerate", { origin: [27, 0, -1], direction: [0, 0, 1] }],
    ["tnearPastTfar", { origin: [7.1, 2.9, -1], direction: [0, 0, 1], tnear: 2, tfar: 1 }],
    ["tfarPastFloat", { origin: [7.1, 2.9, -1], direction: [0, 0, 1], tfar: 1e39 }],
    ["timeHalf", { origin: [7.1, 2.9, -1], direction: [0, 0, 1], time: 0.5 }],
  ];
  let failed: unknown = { ok: true };
  for (const [name, ray] of rays) {
    try {
      put(`rtc.scenes.ray.${name}`, scene.intersect1(ray));
    } catch (error) {
      put(`rtc.scenes.ray.${name}`, null);
      if ("ok" in (failed as object)) failed = failure(error);
    }
  }
  put("rtc.scenes.rays", failed);
  // A mesh added after the commit: Embree's release build answers from the last commit.
  scene.addTriangleMesh(vertices, indices);
  value("rtc.scenes.modified.ray", () => scene.intersect1({ origin: [1, 1, 5], direction: [0, 0, -1] }));
  await observeAsync("rtc.scenes.modified.commit", () => scene.commit());
  value("rtc.scenes.modified.rayAfterCommit", () => scene.intersect1({ origin: [1, 1, 5], direction: [0, 0, -1] }));
  scene.release();
  const uncommitted = device.newScene();
  uncommitted.addTriangleMesh(vertices, indices);
  value("rtc.scenes.uncommitted.ray", () => uncommitted.intersect1({ origin: [2.25, 3.5, -1], direction: [0, 0, 1] }));
  uncommitted.release();
  const { major, minor, patch, string } = device.version;
  put("rtc.scenes.deviceVersion", { major, minor, patch, string });
  device.release();
}

/** probe.c's budget_run: setMemoryBudget(bytes) and no JS monitor (the native ledger decides). */
async function budgetRun(bytes: number): Promise<void> {
  const device = rtc.newDevice("threads=1");
  device.setMemoryBudget(bytes);
  const scene = device.newScene();
  observe(`rtc.budget(${bytes}).addTriangleMesh`, () => scene.addTriangleMesh(vertices, indices));
  await observeAsync(`rtc.budget(${bytes}).commit`, () => scene.commit());
  scene.release();
  device.release();
  put(`rtc.budget(${bytes}).memory`, { ...device.memory });
}

async function embree(): Promise<void> {
  for (const config of ["threads=1", "", "threads=abc", "bogus=1", "isa=bogus", "threads=1,verbose=0"]) {
    observe(`rtc.newDevice(${JSON.stringify(config)})`, () => rtc.newDevice(config).release());
  }
  const device = rtc.newDevice("threads=1");
  const properties = [
    0,
    1,
    2,
    3,
    32,
    33,
    34,
    35,
    63,
    64,
    65,
    66,
    67,
    68,
    96,
    97,
    98,
    99,
    100,
    101,
    128,
    129,
    130,
    4,
    131,
    999,
    -1,
  ];
  for (const p of properties) {
    try {
      put(`rtc.getProperty(${p})`, { value: device.getProperty(p) });
    } catch (error) {
      put(`rtc.getProperty(${p})`, failure(error));
    }
  }
  try {
    put("rtc.getProperty(2^32+1)", { value: device.getProperty(2 ** 32 + 1) });
  } catch (error) {
    put("rtc.getProperty(2^32+1)", failure(error));
  }
  device.release();

  await monitoredRun("rtc.run", null);
  await monitoredRun("rtc.refuseMesh", "addTriangleMesh");
  await monitoredRun("rtc.refuseCommit", "commit");
  // Embree calls the monitor while a scene is released after its device.
  await monitoredRun("rtc.deviceFirst", null, "deviceFirst");
  await monitoredRun("rtc.sceneRetained", null, "sceneRetained");
  await scenes();
  for (const bytes of [0, 3000, 10000, 18128]) await budgetRun(bytes);
}

/**
 * probe.c's put_constants: memlife's public constants, and the codeName OpenCLError and EmbreeError
 * give each code. Every OpenCL code memlife names, one key each: the spec compares those the C
 * headers here define too (memlife also names codes of headers this machine may lack).
 */
function constants(): void {
  for (let code = -1200; code <= 0; code++) {
    const name = new OpenCLError("probe", code).codeName;
    if (!name.startsWith("CL_UNKNOWN_ERROR_")) put(`const.cl.codeName(${code})`, name);
  }
  const groups = {
    DeviceType: cl.DeviceType,
    MemFlags: cl.MemFlags,
    CommandType: cl.CommandType,
    ExecutionStatus: cl.ExecutionStatus,
  };
  for (const [group, table] of Object.entries(groups)) {
    for (const [name, value] of Object.entries(table)) put(`const.cl.${group}.${name}`, value);
  }
  for (const [name, value] of Object.entries(rtc.DeviceProperty)) put(`const.rtc.DeviceProperty.${name}`, value);
  for (let code = 0; code <= 6; code++) put(`const.rtc.codeName(${code})`, new EmbreeError("probe", code, "").codeName);
}

constants();
await opencl();
await embree();
// Which libraries memlife loaded: the spec links the C probe against the same ones.
put("meta.opencl", cl.library().path);
put("meta.embree", { major: rtc.version!.major, path: rtc.version!.path });
