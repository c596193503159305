/**
 * The test API of every spec file, the same on Bun, Deno and Node. No framework: vitest's
 * optional native dependencies break `npm ci` here, and Bun's and Deno's own runners differ.
 * `test/run.ts` runs one spec file in the current runtime; `test/all.ts` runs every spec file
 * on every runtime, each in its own process.
 *
 *   import { test, describe, skip, assert, gc, runtime } from "./harness.ts";
 *   describe("buffers", () => {
 *     test("destructor callbacks run in LIFO order", async () => { ... }, { timeout: 5000 });
 *   });
 *
 * Only `node:` modules are used: all three runtimes provide them, and no JSR is reachable.
 */
import { spawn } from "node:child_process";
import process from "node:process";
import { fileURLToPath } from "node:url";

/** `node:assert/strict`: `assert.equal`, `assert.deepEqual`, `assert.rejects`, ... */
export { default as assert } from "node:assert/strict";

export type Runtime = "bun" | "deno" | "node";
export type TestFn = () => unknown;
export interface TestOptions {
  /** Milliseconds before the test fails as timed out; the run goes on. Default 10 000. */
  timeout?: number;
}

const g = globalThis as { Bun?: { gc(full: boolean): void }; Deno?: unknown; gc?: () => void };

/** The runtime this process runs on. Bun and Deno also define `process`, so test them first. */
export const runtime: Runtime = g.Bun !== undefined ? "bun" : g.Deno !== undefined ? "deno" : "node";

/** Thrown by `skip()`; test/run.ts reports it as a skip, never as a pass. */
export class SkipSignal extends Error {
  override name = "SkipSignal";
}

/** What spec files registered; read by test/run.ts only. */
export const registry = {
  tests: [] as { name: string; fn: TestFn; timeout: number }[],
  before: [] as TestFn[],
  after: [] as TestFn[],
  /** Set by `skip()` during the current test: a test that catches the SkipSignal still skips. */
  skipReason: undefined as string | undefined,
};
const groups: string[] = [];

/** Registers a test. Tests of a file run one at a time, in registration order. */
export function test(name: string, fn: TestFn, options: TestOptions = {}): void {
  registry.tests.push({ name: [...groups, name].join(" > "), fn, timeout: options.timeout ?? 10_000 });
}

/** Groups tests: their names get the prefix "name > ". `fn` runs at once and must register synchronously. */
export function describe(name: string, fn: () => void): void {
  groups.push(name);
  try {
    fn();
  } finally {
    groups.pop();
  }
}

/** Marks the running test skipped, with the reason printed (e.g. a device without fine-grain SVM). */
export function skip(reason: string): never {
  registry.skipReason = reason;
  throw new SkipSignal(reason);
}

/** Runs once before the first test of the file; if it fails, every test of the file fails. */
export function before(fn: TestFn): void {
  registry.before.push(fn);
}

/** Runs once after the last test of the file, even when tests failed. */
export function after(fn: TestFn): void {
  registry.after.push(fn);
}

/**
 * Forces a full, synchronous garbage collection. FinalizationRegistry callbacks run later, from
 * the event loop: `gc(); await sleep(0);` (or a few rounds) before expecting them.
 */
export function gc(): void {
  if (g.Bun) return g.Bun.gc(true);
  // V8's gc() without arguments is a full (major) collection, run synchronously.
  if (typeof g.gc === "function") return g.gc();
  throw new Error(
    "gc() needs the runtime started with --expose-gc (node) or --v8-flags=--expose-gc (deno); test/all.ts does that",
  );
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

/** How each runtime runs a script, with the same flags test/all.ts gives the spec process. */
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
    const child = spawn(process.execPath, [...scriptArgs[runtime], path, ...args], {
      cwd: options.cwd,
      env: { ...process.env, DENO_NO_UPDATE_CHECK: "1", ...options.env },
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
