/**
 * Emits dist/, what the npm package's users run: `npm pack` and `npm publish` call it (prepack),
 * users never do. Node never strips types under node_modules and Deno does not for npm packages,
 * so they get ESM JavaScript with .d.ts; nothing is compiled on install.
 *   node .ci/build.ts
 * Steps: tsc -p tsconfig.build.json; `.ts` specifiers left in .d.ts become `.js` (tsc rewrites them
 * in JavaScript only); ffi/bun-relay.c, ffi/ledger.c, ffi/lane.c and ffi/deferred.c go next to dist/ffi/bun.js, which compiles
 * them at run time relative to itself, and ffi/prebuilt/ next to dist/ffi/native-ledger.js; dist/package.json maps `#ffi` to the emitted backends, as package.json maps it
 * to the sources.
 */
import { execFileSync } from "node:child_process";
import process from "node:process";
import { copyFileSync, cpSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const dist = join(root, "dist");

rmSync(dist, { recursive: true, force: true });
const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
execFileSync(process.execPath, [tsc, "-p", join(root, "tsconfig.build.json")], { stdio: "inherit" });

function* files(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* files(path);
    else yield path;
  }
}

const relativeTs = /((?:from|import)\s*\(?\s*["'])(\.{1,2}\/[^"']*)\.ts(["'])/g;
for (const path of files(dist)) {
  if (!path.endsWith(".d.ts")) continue;
  const text = readFileSync(path, "utf8");
  const rewritten = text.replace(relativeTs, "$1$2.js$3");
  if (rewritten !== text) writeFileSync(path, rewritten);
}

// C beside the backends that use it: bun-relay.c and the ledger.c, lane.c and deferred.c it includes
// (compiled by Bun at run time), and the prebuilt library of Deno and Node with its sources
// (ffi/prebuilt/build.sh: ledger.c, event-relay.c, deferred.c and lane.c).
copyFileSync(join(root, "ffi", "bun-relay.c"), join(dist, "ffi", "bun-relay.c"));
copyFileSync(join(root, "ffi", "ledger.c"), join(dist, "ffi", "ledger.c"));
copyFileSync(join(root, "ffi", "lane.c"), join(dist, "ffi", "lane.c"));
copyFileSync(join(root, "ffi", "deferred.c"), join(dist, "ffi", "deferred.c"));
copyFileSync(join(root, "ffi", "event-relay.c"), join(dist, "ffi", "event-relay.c"));
cpSync(join(root, "ffi", "prebuilt"), join(dist, "ffi", "prebuilt"), { recursive: true });

type Targets = Record<string, string>;
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { imports: Record<string, Targets> };
const imports: Record<string, Targets> = {};
for (const [name, targets] of Object.entries(pkg.imports)) {
  imports[name] = Object.fromEntries(
    Object.entries(targets).map(([condition, target]) => [condition, target.replace(/\.ts$/, ".js")]),
  );
}
writeFileSync(join(dist, "package.json"), JSON.stringify({ type: "module", imports }, null, 2) + "\n");
// stderr: `npm pack --json` prints the package list on stdout, after this script.
console.error(".ci/build.ts: dist/ written");
