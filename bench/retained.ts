/**
 * What memlife keeps alive per buffer whose destructor callback is owed, in bytes of JS heap:
 *   node --expose-gc bench/retained.ts | deno run -A --v8-flags=--expose-gc bench/retained.ts | bun bench/retained.ts
 *
 * Why: a driver thread (NVIDIA) delivers destructor callbacks only once the JS thread yields to
 * its event loop, so a loop that makes and releases buffers keeps every one of them (its Buffer,
 * its destructor entry, its callbacks) until then, and each collection meanwhile copies them all.
 * The native calls are stubbed, as in bench/js-cost.ts: the stubbed release keeps each destructor
 * for later, as a driver thread does; the stub's own record of it is the "nothing" line, which
 * the other lines include.
 *   nothing            the stub's record of a destructor owed, no memlife object kept
 *   + callback         createBuffer, setDestructorCallback, release
 *   + destroyed        createBuffer, `destroyed` read, release
 * V8 (Node, Deno) gives the same bytes run after run; JavaScriptCore (Bun) collects when it decides,
 * and its figures move between runs.
 */
import { cl } from "../src/mod.ts";
import { backend } from "../src/backend.ts";
import type { Callback, Pointer } from "../ffi/types.ts";

const handlers = new Map<Callback, (...args: unknown[]) => unknown>();
(backend as { callback: unknown }).callback = (_def: unknown, fn: (...args: unknown[]) => unknown) => {
  const marker = {} as Callback;
  handlers.set(marker, fn);
  return marker;
};
const ctx = cl.createContext();
const fakeMemory = backend.fromAddress(0x10000n)!;
let destructor: { fn: (...args: unknown[]) => unknown; id: unknown } | undefined;
const owed: (() => void)[] = [];
const stubs: Record<string, (...args: never[]) => unknown> = {
  clCreateBuffer: () => fakeMemory,
  clSetMemObjectDestructorCallback: (_mem: Pointer, fn: Callback, id: unknown) => {
    destructor = { fn: handlers.get(fn)!, id };
    return 0;
  },
  clReleaseMemObject: (mem: Pointer) => {
    const d = destructor;
    destructor = undefined;
    if (d !== undefined) owed.push(() => d.fn(mem, d.id));
    return 0;
  },
};
for (const table of [cl.library().symbols, cl.library().unguarded]) Object.assign(table, stubs);

const g = globalThis as { gc?: () => void; Bun?: { gc(force: boolean): void } };
const collect = g.Bun ? () => g.Bun!.gc(true) : g.gc;
if (collect === undefined) throw new Error("run with --expose-gc (node) or --v8-flags=--expose-gc (deno)");
// Bun's process.memoryUsage().heapUsed does not follow its own collections: JavaScriptCore's count does.
const jsc = g.Bun ? await import("bun:jsc" as string) as { heapStats(): { heapSize: number } } : undefined;
const heap = () => {
  collect();
  collect();
  return jsc !== undefined ? jsc.heapStats().heapSize : process.memoryUsage().heapUsed;
};

const n = 20_000;
const noop = () => {};
const lines: Record<string, () => void> = {
  "nothing": () => {
    destructor = { fn: noop, id: 0 };
    stubs.clReleaseMemObject(fakeMemory as never);
  },
  "+ callback": () => {
    const buffer = ctx.createBuffer(4096);
    buffer.setDestructorCallback(noop);
    buffer.release();
  },
  "+ destroyed": () => {
    const buffer = ctx.createBuffer(4096);
    void buffer.destroyed;
    buffer.release();
  },
};
console.log(`${backend.runtime}: JS heap kept per buffer whose destructor is owed (${n} buffers)`);
for (const [name, make] of Object.entries(lines)) {
  for (let round = 0; round < 3; round++) { // the first rounds warm up
    const before = heap();
    for (let i = 0; i < n; i++) make();
    const bytes = (heap() - before) / n;
    for (const deliver of owed.splice(0)) deliver();
    await null; // memlife's deferred callbacks
    if (round === 2) console.log(`  ${name.padEnd(14)} ${bytes.toFixed(0).padStart(5)} bytes`);
  }
}
// The stubbed context must not reach the real library's release: leave at once.
process.exit(0);
