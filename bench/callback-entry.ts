/**
 * What entering a JS callback from C on the JS thread costs each runtime, measured without memlife:
 * a 4 KiB `CL_MEM_USE_HOST_PTR` buffer made, given a destructor callback, released (PoCL runs the
 * destructor inside clReleaseMemObject) and awaited, one at a time, three ways, round-robin:
 *   plain             create + release, no callback (PyOpenCL's work)
 *   JS callback       the destructor is the runtime's own JS callback, entered inside the release
 *   C callback, then JS  the destructor stays in C (bench/callback-entry.c) and JS settles the
 *                     promise after the release returned: what a binding that queues the call
 *                     and runs it after the native call (Bun's `defer_call`, ffi/bun-relay.c) can reach
 *   bun bench/callback-entry.ts | node bench/callback-entry.ts   (needs cc; PoCL as the platform)
 * Stop 39 on this repository's 2-core VM: Bun 196 / 307 / 251 ns, Node (koffi) 425 / 734 / 627.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const library = join(mkdtempSync(join(tmpdir(), "memlife-callback-entry-")), "libcallback-entry.so");
execFileSync("cc", [
  "-O2",
  "-shared",
  "-fPIC",
  "-o",
  library,
  fileURLToPath(new URL("./callback-entry.c", import.meta.url)),
]);

type Loop = (n: number) => Promise<void>;
const host = new Uint8Array(4096);
let gone: (() => void) | undefined;
const settle = () => {
  gone?.();
  gone = undefined;
};

async function loops(): Promise<Record<string, Loop>> {
  if ("Bun" in globalThis) {
    const { dlopen, JSCallback } = await import("bun:ffi");
    const cl = dlopen("libOpenCL.so.1", {
      clGetPlatformIDs: { args: ["u32", "ptr", "ptr"], returns: "i32" },
      clGetDeviceIDs: { args: ["ptr", "u64", "u32", "ptr", "ptr"], returns: "i32" },
      clCreateContext: { args: ["ptr", "u32", "ptr", "ptr", "ptr", "ptr"], returns: "ptr" },
      clCreateBuffer: { args: ["ptr", "u64", "usize", "ptr", "ptr"], returns: "ptr" },
      clReleaseMemObject: { args: ["ptr"], returns: "i32" },
      clSetMemObjectDestructorCallback: { args: ["ptr", "ptr", "ptr"], returns: "i32" },
    }).symbols;
    const c = dlopen(library, { recorder: { args: [], returns: "ptr" }, take: { args: [], returns: "i32" } }).symbols;
    const platform = new BigUint64Array(1), device = new BigUint64Array(1), err = new Int32Array(1);
    cl.clGetPlatformIDs(1, platform, null);
    cl.clGetDeviceIDs(Number(platform[0]) as never, 0xffffffffn, 1, device, null);
    const ctx = cl.clCreateContext(null, 1, device, null, null, err);
    const js = new JSCallback(settle, { args: ["ptr", "ptr"], returns: "void" });
    const native = c.recorder();
    return {
      plain: (n) => {
        for (let i = 0; i < n; i++) cl.clReleaseMemObject(cl.clCreateBuffer(ctx, 9, 4096, host, err));
        return Promise.resolve();
      },
      "JS callback": async (n) => {
        for (let i = 0; i < n; i++) {
          const destroyed = new Promise<void>((resolve) => (gone = resolve));
          const mem = cl.clCreateBuffer(ctx, 9, 4096, host, err);
          cl.clSetMemObjectDestructorCallback(mem, js.ptr, null);
          cl.clReleaseMemObject(mem);
          await destroyed;
        }
      },
      "C callback, then JS": async (n) => {
        for (let i = 0; i < n; i++) {
          const destroyed = new Promise<void>((resolve) => (gone = resolve));
          const mem = cl.clCreateBuffer(ctx, 9, 4096, host, err);
          cl.clSetMemObjectDestructorCallback(mem, native, null);
          cl.clReleaseMemObject(mem);
          if (c.take() > 0) settle();
          await destroyed;
        }
      },
    };
  }
  const koffi = (await import("koffi")).default;
  const cl = koffi.load("libOpenCL.so.1");
  const c = koffi.load(library);
  const clGetPlatformIDs = cl.func("int clGetPlatformIDs(uint32_t, _Out_ void **, void *)");
  const clGetDeviceIDs = cl.func("int clGetDeviceIDs(void *, uint64_t, uint32_t, _Out_ void **, void *)");
  const clCreateContext = cl.func("void *clCreateContext(void *, uint32_t, void **, void *, void *, _Out_ int *)");
  const clCreateBuffer = cl.func("void *clCreateBuffer(void *, uint64_t, size_t, void *, _Out_ int *)");
  const clReleaseMemObject = cl.func("int clReleaseMemObject(void *)");
  const Destructor = koffi.proto("void EntryDestructor(void *, void *)");
  const setJs = cl.func("clSetMemObjectDestructorCallback", "int", ["void *", koffi.pointer(Destructor), "void *"]);
  const setC = cl.func("clSetMemObjectDestructorCallback", "int", ["void *", "void *", "void *"]);
  const recorder = c.func("void *recorder(void)");
  const take = c.func("int32_t take(void)");
  const platform = [null], device = [null], err = [0];
  clGetPlatformIDs(1, platform, null);
  clGetDeviceIDs(platform[0], 0xffffffffn, 1, device, null);
  const ctx = clCreateContext(null, 1, device, null, null, err);
  const js = koffi.register(settle, koffi.pointer(Destructor));
  const native = recorder();
  return {
    plain: (n) => {
      for (let i = 0; i < n; i++) clReleaseMemObject(clCreateBuffer(ctx, 9, 4096, host, err));
      return Promise.resolve();
    },
    "JS callback": async (n) => {
      for (let i = 0; i < n; i++) {
        const destroyed = new Promise<void>((resolve) => (gone = resolve));
        const mem = clCreateBuffer(ctx, 9, 4096, host, err);
        setJs(mem, js, null);
        clReleaseMemObject(mem);
        await destroyed;
      }
    },
    "C callback, then JS": async (n) => {
      for (let i = 0; i < n; i++) {
        const destroyed = new Promise<void>((resolve) => (gone = resolve));
        const mem = clCreateBuffer(ctx, 9, 4096, host, err);
        setC(mem, native, null);
        clReleaseMemObject(mem);
        if (take() > 0) settle();
        await destroyed;
      }
    },
  };
}

const all = await loops();
const times: Record<string, number[]> = {};
for (let round = 0; round < 11; round++) {
  for (const [name, loop] of Object.entries(all)) {
    const n = 20_000, t = performance.now();
    await loop(n);
    (times[name] ??= []).push(((performance.now() - t) * 1e6) / n);
  }
}
for (const [name, list] of Object.entries(times)) {
  list.sort((a, b) => a - b);
  console.log(`${name.padEnd(22)} ${list[5].toFixed(0)} ns (median of 11)`);
}
