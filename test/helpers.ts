/**
 * Helpers of the spec files that are about memlife, not about running tests (vitest does that):
 * the runtime in use, a forced full GC, a child script with its exit code, waiting with a limit,
 * and `skip(reason)` from anywhere inside a running test.
 *
 *   import { describe, test } from "vitest";
 *   import { assert, gc, runScript, runtime, skip } from "./helpers.ts";
 *
 * Only `node:` modules and vitest are used: all three runtimes provide them.
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, isAbsolute, join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { TestRunner } from "vitest";

/** `node:assert/strict`: `assert.equal`, `assert.deepEqual`, `assert.rejects`, ... */
import assert from "node:assert/strict";
export { assert };

export type Runtime = "bun" | "deno" | "node";

const g = globalThis as { Bun?: { gc(full: boolean): void }; Deno?: unknown; gc?: () => void };

/** The runtime this process runs on. Bun and Deno also define `process`, so test them first. */
export const runtime: Runtime = g.Bun !== undefined ? "bun" : g.Deno !== undefined ? "deno" : "node";
/**
 * This run is test/all.ts's `deno-nolib` or `node-nolib` pass: a copy of the tree without the
 * prebuilt library, as on a platform it is not built for. The tests that check the library's
 * presence check its absence instead.
 */
export const nolib: boolean = process.env.MEMLIFE_TEST_NOLIB === "1";

/**
 * Marks the running test skipped with `reason`, shown by every reporter and by test/all.ts's
 * summary: the test context's `skip(note)`, reached without taking the context as a parameter.
 * A test that catches the error it throws still counts as skipped, with its reason.
 */
export function skip(reason: string): never {
  const current = TestRunner.getCurrentTest();
  if (!current) throw new Error(`skip("${reason}") called outside a running test`);
  // vitest keeps the note only when its error reaches the runner; set it for a test that catches it.
  if (current.result) (current.result as { note?: string }).note = reason;
  return current.context.skip(reason);
}

/**
 * Forces a full, synchronous garbage collection. FinalizationRegistry callbacks run later, from
 * the event loop: `gc(); await sleep(0);` (or a few rounds) before expecting them.
 */
export function gc(): void {
  if (g.Bun) return g.Bun.gc(true);
  // V8's gc() without arguments is a full (major) collection, run synchronously.
  if (typeof g.gc === "function") return g.gc();
  throw new Error("gc() needs --expose-gc: vitest.config.ts gives it to the forks pool's processes (execArgv)");
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** `promise`, or a rejection "`what` did not settle within `ms` ms", whichever comes first. */
export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms);
  });
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}

export interface ScriptResult {
  /** Exit code, or null when a signal ended the child. */
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  /** The child outlived `timeout` and was killed with SIGKILL. */
  timedOut: boolean;
}

/** How each runtime runs a script: with gc exposed, as test/all.ts runs vitest. */
const scriptArgs: Record<Runtime, string[]> = {
  bun: [],
  deno: ["run", "-A", "--v8-flags=--expose-gc"],
  node: ["--expose-gc"],
};

/**
 * Runs `file` (a path, relative to the working directory, or a `file:` URL such as
 * `new URL("./fixtures/x.ts", import.meta.url)`) in a child of the current runtime, and resolves
 * when it ended: for checks of exit codes with callbacks or async native calls in flight.
 */
export function runScript(
  file: string | URL,
  args: string[] = [],
  options: { env?: Record<string, string>; timeout?: number; cwd?: string } = {},
): Promise<ScriptResult> {
  const path = file instanceof URL ? fileURLToPath(file) : file;
  const timeout = options.timeout ?? 30_000;
  return new Promise((resolve, reject) => {
    // process.execPath is the bun, deno or node binary on all three runtimes.
    // A child starts as a user's program would: without the Worker opt-in of vitest.config.ts.
    const { MEMLIFE_ALLOW_WORKERS: _optIn, ...inherited } = process.env;
    const child = spawn(process.execPath, [...scriptArgs[runtime], path, ...args], {
      cwd: options.cwd,
      env: { ...inherited, DENO_NO_UPDATE_CHECK: "1", ...options.env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    let timedOut = false;
    child.stdout!.setEncoding("utf8").on("data", (s: string) => (stdout += s));
    child.stderr!.setEncoding("utf8").on("data", (s: string) => (stderr += s));
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, timeout);
    child.on("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
    // "close", not "exit": it comes after the pipes are drained, so stdout is complete.
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, timedOut });
    });
  });
}

/**
 * `runScript`, for a child that must end by itself: no hang, no signal, exit code 0 (each checked,
 * with the end of its output in the message). Returns the last line of its stdout, where the
 * fixtures print "ok" or their JSON report.
 */
export async function runToEnd(
  file: string | URL,
  args: string[] = [],
  options: { env?: Record<string, string>; timeout?: number; cwd?: string } = {},
): Promise<string> {
  const r = await runScript(file, args, options);
  const what = `${String(file).split("/").at(-1)} ${args.join(" ")}`.trim();
  const out = `${r.stdout}${r.stderr}`.trim().slice(-2000);
  assert.equal(r.timedOut, false, `${what}: hung\n${out}`);
  assert.equal(r.signal, null, `${what}: killed by ${r.signal}\n${out}`);
  assert.equal(r.code, 0, `${what}: exit code ${r.code}\n${out}`);
  return r.stdout.trim().split("\n").at(-1) ?? "";
}

/**
 * A driver shim of test/native/ (`name`.c) built into a temporary directory, over `library`: the
 * path a `*_LIBRARY` variable names (then linked by that path, with an RPATH that wins over
 * LD_LIBRARY_PATH, as on the GPU machine), or a name for the linker (`-lOpenCL`, `-l:libembree3.so.3`).
 * The shim reaches that library through dlsym only, hence --no-as-needed. Or why it cannot be built
 * (no C compiler, no headers): the caller skips. `cleanup()` removes the directory.
 */
export function buildShim(name: string, library: string): { path: string; cleanup(): void } | { skip: string } {
  const dir = mkdtempSync(join(tmpdir(), `memlife-${name}-`));
  const path = join(dir, `lib${name}.so`);
  const source = fileURLToPath(new URL(`./native/${name}.c`, import.meta.url));
  const link = isAbsolute(library)
    ? [realpathSync(library), `-Wl,--disable-new-dtags,-rpath,${dirname(realpathSync(library))}`]
    : [library];
  const args = ["-O2", "-fPIC", "-shared", "-pthread", "-o", path, source, "-Wl,--no-as-needed", ...link, "-ldl"];
  const r = spawnSync("cc", args, { encoding: "utf8" });
  const cleanup = () => rmSync(dir, { recursive: true, force: true });
  if (r.error !== undefined || r.status !== 0) {
    cleanup();
    return { skip: `cannot build test/native/${name}.c (${r.error?.message ?? r.stderr.trim()})` };
  }
  return { path, cleanup };
}

/** The OpenCL loader for buildShim: the one OPENCL_LIBRARY names, else the linker's libOpenCL. */
export function openclLoader(): string {
  const given = process.env.OPENCL_LIBRARY;
  return given !== undefined && isAbsolute(given) ? given : "-lOpenCL";
}

// --- Embree test data ----------------------------------------------------------------------------

/** mulberry32: the same random scenes on every runtime and run. */
export function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** `triangles` small triangles scattered in a 100-unit cube (shared vertices, random winding). */
export function randomMesh(rand: () => number, triangles: number): { vertices: Float32Array; indices: Uint32Array } {
  const vertices = new Float32Array(triangles * 9);
  for (let t = 0; t < triangles; t++) {
    const x = rand() * 100, y = rand() * 100, z = rand() * 100;
    for (let k = 0; k < 9; k += 3) {
      vertices[t * 9 + k] = x + rand();
      vertices[t * 9 + k + 1] = y + rand();
      vertices[t * 9 + k + 2] = z + rand();
    }
  }
  const indices = new Uint32Array(triangles * 3);
  for (let i = 0; i < indices.length; i++) indices[i] = i;
  return { vertices, indices };
}
