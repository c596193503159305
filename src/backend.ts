/**
 * The FFI backend of the runtime we run on, chosen by the package's `#ffi` import and its export
 * conditions ("bun", "deno", else Node's koffi), so that Node never sees `bun:ffi`, Bun never loads
 * koffi, Deno loads neither, and no module needs a top-level await (which would stop Node's
 * require() of the package). package.json maps `#ffi` to ffi/*.ts for the sources; the packed
 * dist/package.json maps it to the emitted ffi/*.js; deno.json maps it to ffi/deno.ts for JSR.
 */
import { backend as selected } from "#ffi";
import type { Backend } from "../ffi/types.ts";

const g = globalThis as { Bun?: unknown; Deno?: unknown };
const host: Backend["runtime"] = g.Bun !== undefined ? "bun" : g.Deno !== undefined ? "deno" : "node";
if (selected.runtime !== host) {
  // A bundler or test runner (Vite, esbuild...) resolves `#ffi` with its own list of conditions.
  throw new Error(
    `memlife: the ${selected.runtime} backend was loaded under ${host}: whatever resolved the package's "#ffi" ` +
      `import did not use the "${host}" export condition; add it to the resolver's conditions (e.g. Vite's ` +
      "resolve.conditions, esbuild's --conditions)",
  );
}

/**
 * "bun", "deno" or "node": the runtime memlife loaded its backend for.
 * @example
 * import { runtime } from "memlife";
 * console.log(runtime); // "node" under Node: koffi drives the native calls
 */
export const runtime: Backend["runtime"] = selected.runtime;

export const backend: Backend = selected;

/** Whether this realm is a Worker (the backend tells: the core touches no runtime API). */
export const inWorker: boolean = selected.inWorker;

/**
 * Environment variables without touching a runtime API (`process` exists on all three). Every
 * native call of memlife is preceded by one, so the permission check (Deno) comes first.
 */
export function envVar(name: string): string | undefined {
  backend.requirePermissions?.(name);
  const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env;
  const value = env?.[name];
  return value === "" ? undefined : value;
}

export const osName: string = (globalThis as { process?: { platform?: string } }).process?.platform ?? "linux";
