/**
 * Why Bun's `hostPtr: "use"` row reads slower in the bench than in a loop of its own: the same
 * loop (createBuffer(view, { hostPtr: "use" }), `destroyed` read, release, awaited), timed after
 * other code paths ran first in the process, as the bench's other cases and its raw floor run
 * them:
 *   (none)       the loop alone
 *   cb           a second destructor callback slot used first (the raw floor's own callback)
 *   size         createBuffer(size) with `destroyed` awaited used first (the "await destroyed" row)
 *   cb size      both
 *   bun bench/hostptr-paths.ts | deno run -A bench/hostptr-paths.ts | node bench/hostptr-paths.ts
 * Each mode runs in a child process of its own (the point is what ran before in the process); the
 * figure is the median of 8 rounds of 200k buffers, in ns a buffer.
 * On this repository's 2-core VM, 2026-11-29, Bun, three runs: alone 253-265 ns; after "cb"
 * 281-303, after "size" 264-293, after both 276-353. Which figure a process gets varies from run to
 * run (where JavaScriptCore inlines, tiered up at different moments), but it is never below the
 * loop alone: the bench's 318-341 ns for this row (README, Benchmarks) is such a process.
 * Node 482-548 and Deno 518-547 move less.
 */
import { spawnSync } from "node:child_process";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { cl } from "../src/mod.ts";
import { backend } from "../src/backend.ts";
import { openclCallbacks } from "../ffi/symbols/opencl.ts";

const mode = process.env.MEMLIFE_HOSTPTR_PATHS;
if (mode === undefined) {
  // The parent: one child per mode, with this runtime.
  const self = fileURLToPath(import.meta.url);
  const argv = "Deno" in globalThis ? ["run", "-A", self] : [self];
  console.log(
    `${backend.runtime}: a 4 KiB hostPtr "use" buffer awaited, after other paths ran (ns, median of 8 rounds)`,
  );
  for (const m of ["", "cb", "size", "cb size"]) {
    const r = spawnSync(process.execPath, argv, {
      env: { ...process.env, MEMLIFE_HOSTPTR_PATHS: m },
      encoding: "utf8",
    });
    console.log(`  ${(m || "(none)").padEnd(8)} ${r.status === 0 ? r.stdout.trim() : `failed: ${r.stderr.trim()}`}`);
  }
} else {
  const ctx = cl.createContext();
  const host = new Uint8Array(new ArrayBuffer(4096));
  const use = { hostPtr: "use" } as const;
  if (mode.includes("cb")) {
    // Another destructor slot, used as the raw floor uses its own.
    let wake: (() => void) | undefined;
    const callback = backend.callback(openclCallbacks.memDestructor, () => wake!());
    const s = cl.library().symbols;
    const errcode = new Int32Array(1);
    for (let i = 0; i < 20_000; i++) {
      const gone = new Promise<void>((resolve) => (wake = resolve));
      const mem = s.clCreateBuffer(ctx.unsafeHandle, 1 | 8, 4096, host, errcode);
      s.clSetMemObjectDestructorCallback(mem, callback, 0);
      s.clReleaseMemObject(mem);
      await gone;
    }
  }
  if (mode.includes("size")) {
    for (let i = 0; i < 20_000; i++) {
      const buffer = ctx.createBuffer(4096);
      const gone = buffer.destroyed;
      buffer.release();
      await gone;
    }
  }
  const times: number[] = [];
  const n = 200_000;
  for (let round = 0; round < 9; round++) {
    const t = performance.now();
    for (let i = 0; i < n; i++) {
      const buffer = ctx.createBuffer(host, use);
      const gone = buffer.destroyed;
      buffer.release();
      await gone;
    }
    // The first round warms up.
    if (round > 0) times.push(((performance.now() - t) * 1e6) / n);
  }
  ctx.release();
  times.sort((a, b) => a - b);
  console.log(times[times.length >> 1].toFixed(0));
}
