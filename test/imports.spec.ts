/**
 * Value imports among src/ and ffi/ stay acyclic: a cycle makes module evaluation order decide
 * whether a class exists when another module's top level uses it. Type-only imports (`import type`,
 * `export type`) are erased and may form cycles (the children of a context name `Context` as a type).
 * An import whose every name is marked `type` still loads its module, so it counts as a value import.
 */
import { describe, test } from "vitest";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { assert } from "./helpers.ts";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");

function files(dir: string): string[] {
  return readdirSync(join(root, dir)).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(join(root, path)).isDirectory()) return files(path);
    return path.endsWith(".ts") && !path.endsWith(".d.ts") ? [path] : [];
  });
}

/** The `#ffi` import resolves to one backend per runtime: each is an edge. */
const ffiBackends = ["ffi/bun.ts", "ffi/deno.ts", "ffi/node.ts"];

/** Value imports of a module, as paths relative to the root (only those inside src/ and ffi/). */
function valueImports(path: string, source: string): string[] {
  const out: string[] = [];
  const statement =
    /^\s*(import|export)\s+(type\s+)?([^;]*?)\s*from\s*["']([^"']+)["']|^\s*import\s*["']([^"']+)["']/gm;
  for (const m of source.matchAll(statement)) {
    if (m[2] !== undefined) continue; // import type / export type
    const specifier = m[4] ?? m[5];
    if (specifier === "#ffi") out.push(...ffiBackends);
    else if (specifier.startsWith(".")) out.push(relative(root, resolve(root, dirname(path), specifier)));
  }
  return out.filter((p) => p.startsWith("src/") || p.startsWith("ffi/"));
}

function cycles(graph: Map<string, string[]>): string[][] {
  const found: string[][] = [];
  const state = new Map<string, "open" | "done">();
  const stack: string[] = [];
  const visit = (node: string): void => {
    state.set(node, "open");
    stack.push(node);
    for (const next of graph.get(node) ?? []) {
      if (state.get(next) === "open") found.push([...stack.slice(stack.indexOf(next)), next]);
      else if (!state.has(next)) visit(next);
    }
    stack.pop();
    state.set(node, "done");
  };
  for (const node of [...graph.keys()].sort()) if (!state.has(node)) visit(node);
  return found;
}

describe("module graph", () => {
  test("value imports among src/ and ffi/ have no cycle", () => {
    const graph = new Map<string, string[]>();
    for (const path of [...files("src"), ...files("ffi")]) {
      graph.set(path, valueImports(path, readFileSync(join(root, path), "utf8")));
    }
    assert.ok(graph.size > 20, `found only ${graph.size} modules`);
    for (const [from, targets] of graph) {
      for (const to of targets) assert.ok(graph.has(to), `${from} imports ${to}, which does not exist`);
    }
    assert.deepEqual(cycles(graph).map((c) => c.join(" -> ")), []);
  });

  test("the check sees a value cycle and lets a type-only one pass", () => {
    const graph = new Map<string, string[]>([
      ["src/a.ts", valueImports("src/a.ts", `import { b } from "./b.ts";\nimport type { C } from "./c.ts";`)],
      ["src/b.ts", valueImports("src/b.ts", `export { a } from "./a.ts";`)],
      ["src/c.ts", valueImports("src/c.ts", `import type { A } from "./a.ts";\nexport type { B } from "./b.ts";`)],
    ]);
    assert.deepEqual(graph.get("src/c.ts"), []);
    assert.deepEqual(cycles(graph).map((c) => c.join(" -> ")), ["src/a.ts -> src/b.ts -> src/a.ts"]);
  });
});
