/**
 * The whole public API as a user's program sees it, type-checked (never run) by test/consumer/run.sh
 * against the installed package under the strictest common compiler settings. A declaration that
 * needs the user's @types, a missing export or a type that does not survive the emit fails here.
 */
import {
  type CallbackErrorHandler,
  type CallbackSource,
  cl,
  EmbreeError,
  LibraryLoadError,
  onCallbackError,
  OpenCLError,
  ReleasedError,
  rtc,
  runtime,
} from "memlife";

const which: "bun" | "deno" | "node" = runtime;
/** Where this file puts what it reads: it uses no global beyond the language's (no console). */
export const seen: unknown[] = [];

const handler: CallbackErrorHandler = (error: unknown, source: CallbackSource) => {
  seen.push(which, source, error);
};
onCallbackError(handler);
onCallbackError(null);

export async function opencl(): Promise<void> {
  const platforms: cl.Platform[] = cl.getPlatforms();
  const platform = platforms[0];
  if (platform === undefined) return;
  const texts: string[] = [platform.name, platform.vendor, platform.version, platform.profile, ...platform.extensions];
  const devices: cl.Device[] = platform.getDevices(cl.DeviceType.ALL);
  const device: cl.Device = devices[0] ?? cl.defaultDevice();
  const caps: cl.SVMCapabilities = device.svm;
  const numbers: number[] = [device.globalMemSize, device.maxMemAllocSize, device.maxComputeUnits, device.typeMask];
  texts.push(device.name, device.vendor, device.version, device.driverVersion, device.type, device.platform.name);

  const ctx: cl.Context = cl.createContext([device]);
  const again: cl.Context = ctx.retain();
  again.release();
  const queue: cl.CommandQueue = ctx.createCommandQueue(ctx.devices[0]);

  const options: cl.BufferOptions = { access: "read_write", hostPtr: "use" };
  const mode: cl.HostPtrMode = "copy";
  const access: cl.Access = "read_only";
  const host = new Float32Array(256);
  const buf: cl.Buffer = ctx.createBuffer(host, options);
  const plain: cl.Buffer = ctx.createBuffer(1024, { hostPtr: mode, access });
  const onDestroy: cl.DestructorCallback = (b: cl.Buffer) => numbers.push(b.size, b.flags);
  buf.setDestructorCallback(onDestroy);
  const destroyed: Promise<void> = buf.destroyed;
  const transfer: cl.TransferOptions = { offset: 0, waitFor: [] };
  const written: cl.Event = queue.enqueueWriteBuffer(plain, new Uint8Array(1024), transfer);
  await written.wait();
  const read: Uint8Array = await queue.readBuffer(plain);
  const intoFloats: Float32Array = await queue.readBuffer(buf, new Float32Array(256), { waitFor: [written] });
  await queue.writeBuffer(plain, read);
  const readEvent: cl.Event = queue.enqueueReadBuffer(plain, new Uint8Array(1024));
  const status: number = readEvent.status;
  const kind: number = readEvent.commandType;
  queue.flush();
  await queue.finish();
  numbers.push(intoFloats.length, status, kind, buf.referenceCount, ctx.referenceCount, queue.referenceCount);
  const address: bigint = buf.hostPointer;
  buf.retain().release();
  buf.release();
  plain[Symbol.dispose]();
  await destroyed;

  const user: cl.UserEvent = ctx.createUserEvent();
  user.setStatus(cl.ExecutionStatus.COMPLETE);
  user.release();

  if (caps.coarseGrainBuffer) {
    const svmOptions: cl.SVMOptions = {
      fineGrain: caps.fineGrainBuffer,
      atomics: false,
      alignment: 0,
      access: "read_write",
    };
    const alloc: cl.SVMAllocation = ctx.svmAlloc(4096, svmOptions);
    const where: bigint = alloc.address;
    if (alloc.fineGrain) new Uint8Array(alloc.arrayBuffer).fill(1);
    const onFree: cl.SVMFreeCallback = (q: cl.CommandQueue, freed: cl.SVMAllocation[]) =>
      numbers.push(freed.length, q.referenceCount);
    const freeOptions: cl.SVMFreeOptions = { onFree, waitFor: [] };
    const event = queue.enqueueSVMFree([alloc], freeOptions);
    if (event.commandType === cl.CommandType.SVM_FREE) await event.wait();
    numbers.push(Number(where - address), alloc.size);
  }
  await compute(ctx, queue, caps, numbers, texts);
  numbers.push(cl.MemFlags.READ_WRITE);
  queue.release();
  ctx[Symbol.dispose]();
  seen.push(texts.length, numbers.length, typeof cl.library);
}

/** Programs, kernels and the commands that use memory on the device. */
async function compute(
  ctx: cl.Context,
  queue: cl.CommandQueue,
  caps: cl.SVMCapabilities,
  numbers: number[],
  texts: string[],
): Promise<void> {
  const program: cl.Program = ctx.createProgram(
    "__kernel void k(__global float *a, float s, __local float *t) { a[0] *= s; }",
  );
  try {
    await program.build("", ctx.devices);
  } catch (error) {
    if (error instanceof OpenCLError) {
      for (const entry of error.buildLog ?? []) texts.push(entry.log, entry.device.name);
    }
  }
  const log: cl.BuildLogEntry[] = [{ device: ctx.devices[0]!, log: program.buildLog() }];
  texts.push(program.source, ...program.kernelNames, ...log.map((e) => e.log));
  const kernel: cl.Kernel = program.createKernel("k");
  const all: cl.Kernel[] = program.createKernels();
  const buf: cl.Buffer = ctx.createBuffer(64);
  const scale: cl.TypedValue = cl.float(2);
  const scratch: cl.LocalMemory = cl.local(64);
  const arg: cl.KernelArg = buf;
  kernel.setArg(0, arg).setArg(1, scale).setArg(2, scratch);
  const ndrange: cl.NDRangeOptions = { local: [1], offset: [0], waitFor: [] };
  const run: cl.Event = queue.enqueueNDRangeKernel(kernel, [1], ndrange);
  const fill: cl.RangeOptions = { offset: 0, size: 64, waitFor: [run] };
  const filled: cl.Event = queue.enqueueFillBuffer(buf, cl.int4(1, 2, 3, 4), fill);
  const other: cl.Buffer = ctx.createBuffer(64);
  const copy: cl.CopyBufferOptions = { srcOffset: 0, dstOffset: 0, size: 64, waitFor: [filled] };
  queue.enqueueCopyBuffer(buf, other, copy).release();
  const marker: cl.Event = queue.enqueueMarker({ waitFor: [] });
  queue.enqueueBarrier().release();
  await marker.wait();
  numbers.push(kernel.workGroupSize(), kernel.preferredWorkGroupSizeMultiple(), program.numKernels, all.length);
  if (caps.coarseGrainBuffer) {
    const alloc: cl.SVMAllocation = ctx.svmAlloc(64);
    kernel.setArg(0, alloc).setSVMPointers([alloc]);
    const copyOptions: cl.SVMCopyOptions = { size: 64, srcOffset: 0, dstOffset: 0 };
    queue.enqueueSVMMemcpy(alloc, new Float32Array(16), copyOptions).release();
    queue.enqueueSVMMemFill(alloc, cl.float(0)).release();
    const access: cl.MapAccess = "read";
    const mapOptions: cl.SVMMapOptions = { access, offset: 0, size: 64 };
    const mapping: cl.SVMMapping = await queue.mapSVM(alloc, mapOptions);
    numbers.push(new Float32Array(mapping.arrayBuffer)[0] ?? 0);
    const unmapped = mapping.unmap();
    await unmapped.wait();
    unmapped.release();
    const freed = queue.enqueueSVMFree([alloc]);
    await freed.wait();
    freed.release();
  }
  for (const k of all) k.release();
  kernel.release();
  program.release();
  buf.release();
  other.release();
}

export async function embree(vertices: Float32Array, indices: Uint32Array): Promise<void> {
  const loaded: rtc.Version = rtc.load();
  const version: rtc.Version | null = rtc.version;
  const options: rtc.DeviceOptions = { accounting: true };
  const device: rtc.Device = rtc.newDevice("threads=0", options);
  const monitor: rtc.MemoryMonitor = (bytes: number, post: boolean) => (post ? undefined : bytes < 1 << 30);
  device.setMemoryMonitorFunction(monitor);
  device.setMemoryMonitorFunction(null);
  device.setMemoryBudget(64 << 20);
  const budget: number | null = device.memoryBudget;
  const scene: rtc.Scene = device.newScene();
  const geometry: number = scene.addTriangleMesh(vertices, indices);
  try {
    await scene.commit();
  } catch (error) {
    if (error instanceof EmbreeError) seen.push(error.code, error.codeName, error.fn, error.embreeMessage, error.cause);
  }
  const ray: rtc.Ray = { origin: [0, 0, -1], direction: [0, 0, 1], tnear: 0, tfar: Infinity, time: 0, mask: -1 };
  const hit: rtc.Hit | null = scene.intersect1(ray);
  const stats: rtc.MemoryStats = device.memory;
  const property: number = device.getProperty(rtc.DeviceProperty.VERSION);
  seen.push(
    loaded.string,
    version?.major,
    device.config,
    device.version.minor,
    scene.committed,
    scene.device === device,
  );
  seen.push(
    geometry,
    hit?.distance,
    hit?.normal[0],
    stats.bytes,
    stats.peak,
    stats.calls,
    stats.denied,
    stats.accounting,
  );
  seen.push(budget, property);
  scene.retain().release();
  scene.release();
  device[Symbol.dispose]();
}

export function errors(error: unknown): string {
  if (error instanceof OpenCLError) return `${error.fn}: ${error.codeName} (${error.code})`;
  if (error instanceof LibraryLoadError) return `${error.library}: ${error.tried.join(", ")}`;
  if (error instanceof ReleasedError) return error.message;
  if (error instanceof EmbreeError) return error.codeName;
  return String(error);
}
