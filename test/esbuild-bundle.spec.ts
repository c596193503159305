// memlife inside a Node program that esbuild bundled, as services and serverless functions are
// shipped: memlife's own files (ffi/prebuilt) are not beside the bundle, so it takes the JS
// fallbacks, and koffi stays a package (a bundler leaves a native module outside). esbuild's
// CommonJS output has no `import.meta.url` (it becomes `{}.url`, undefined): the first destructor
// callback threw "TypeError: Invalid URL" while memlife looked for its prebuilt library there.
// Each bundle is built here from test/fixtures/bundled.ts and run as a user would.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, test } from "vitest";
import { assert, runtime, skip } from "./helpers.ts";

const fixture = fileURLToPath(new URL("./fixtures/bundled.ts", import.meta.url));
const esbuild = fileURLToPath(new URL("../node_modules/.bin/esbuild", import.meta.url));
const temp = mkdtempSync(join(tmpdir(), "memlife-esbuild-"));
afterAll(() => rmSync(temp, { recursive: true, force: true }));
// koffi stays a package: the bundles' folder gets the project's.
mkdirSync(join(temp, "node_modules"));
symlinkSync(fileURLToPath(new URL("../node_modules/koffi", import.meta.url)), join(temp, "node_modules", "koffi"));

const expected = { destructors: 1, released: "ReleasedError", onFree: 1, monitored: true, bytes: true };

/** Bundles the fixture with `flags`, runs the bundle with Node, and returns its JSON line. */
function bundleAndRun(name: string, flags: string[]): Record<string, unknown> {
  const out = join(temp, name);
  execFileSync(esbuild, [fixture, "--bundle", "--platform=node", "--external:koffi", `--outfile=${out}`, ...flags], {
    stdio: "pipe",
  });
  let stdout: string;
  try {
    stdout = execFileSync(process.execPath, [out], { cwd: temp, encoding: "utf8", timeout: 60_000, stdio: "pipe" });
  } catch (error) {
    const e = error as { status?: number; signal?: string; stdout?: string; stderr?: string };
    throw new Error(`node ${name}: status ${e.status} ${e.signal ?? ""}\n${e.stdout}\n${e.stderr}`);
  }
  return JSON.parse(stdout.trim().split("\n").at(-1)!) as Record<string, unknown>;
}

describe("bundled by esbuild for Node (child processes)", () => {
  for (
    const [name, what, flags] of [
      ["bundle.cjs", "CommonJS (esbuild's default for Node)", []],
      ["bundle.min.cjs", "CommonJS, minified", ["--minify"]],
      ["bundle.mjs", "ES module", ["--format=esm"]],
      ["bundle.min.mjs", "ES module, minified", ["--format=esm", "--minify"]],
    ] as const
  ) {
    test(`${what}: destructors, an SVM free and a monitored commit run on the JS fallbacks`, () => {
      if (runtime !== "node") skip("Node runs a bundle made for Node");
      if (!existsSync(esbuild)) skip("no esbuild in node_modules (a devDependency; the GPU machine carries none)");
      assert.deepEqual(bundleAndRun(name, [...flags]), expected);
    }, 90_000);
  }
});
