/**
 * Picks the FFI backend of the runtime we run on. The import is dynamic so that Node never sees
 * `bun:ffi`, Bun never loads koffi, and Deno loads neither.
 */
import type { Backend } from "../ffi/types.ts";

const g = globalThis as { Bun?: unknown; Deno?: unknown };

/** "bun", "deno" or "node": the runtime memlife loaded its backend for. */
export const runtime: Backend["runtime"] = g.Bun !== undefined ? "bun" : g.Deno !== undefined ? "deno" : "node";

async function load(): Promise<Backend> {
  if (runtime === "bun") return (await import("../ffi/bun.ts")).backend;
  if (runtime === "deno") return (await import("../ffi/deno.ts")).backend;
  return (await import("../ffi/node.ts")).backend;
}

export const backend: Backend = await load();

/**
 * Whether this realm is a Worker: `node:worker_threads` says so on Node and Bun (web Workers
 * included); in a Deno web Worker it says "main thread", but WorkerGlobalScope exists there.
 */
export const inWorker: boolean = !(await import("node:worker_threads")).isMainThread ||
  typeof (globalThis as { WorkerGlobalScope?: unknown }).WorkerGlobalScope === "function";

/** Environment variables without touching a runtime API (`process` exists on all three). */
export function envVar(name: string): string | undefined {
  const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env;
  const value = env?.[name];
  return value === "" ? undefined : value;
}

export const osName: string = (globalThis as { process?: { platform?: string } }).process?.platform ?? "linux";
