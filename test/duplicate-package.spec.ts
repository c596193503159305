// Two copies of memlife in one process: a duplicated dependency, as when two versions are installed
// side by side (node_modules/a/node_modules/memlife and node_modules/memlife). The README neither
// promises nor forbids it; this locks in what happens today: both copies work at once (each its own
// native state, callbacks and monitor), each refuses the other's objects with a TypeError, and an
// exit with both copies' commits in flight keeps the program's exit code.
// The project is made as an install would: in a temporary folder, node_modules/memlife-a and
// node_modules/memlife-b each hold the package as published (package.json's "files", after the
// prepack build, .ci/build.ts, run on a copy of the sources; no npm, no registry), node_modules/koffi
// links to the repository's. test/fixtures/duplicate-package.ts is the program, run there on the
// suite's runtime.
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, test } from "vitest";
import { assert, runScript, skip } from "./helpers.ts";

const root = fileURLToPath(new URL("..", import.meta.url));
const temp = mkdtempSync(join(tmpdir(), "memlife-duplicate-"));
const project = join(temp, "app");
afterAll(() => rmSync(temp, { recursive: true, force: true }));

/** Why the package cannot be built here (the GPU machine carries a runtime and vitest, not tsc). */
const missing = !existsSync(join(root, "node_modules/typescript/bin/tsc"))
  ? "the prepack build needs TypeScript (node_modules/typescript), not installed here"
  : !existsSync(join(root, "node_modules/.bin/node")) && !onPath("node")
  ? "the prepack build runs on Node, not installed here"
  : undefined;

function onPath(command: string): boolean {
  return (process.env.PATH ?? "").split(":").some((dir) => dir !== "" && existsSync(join(dir, command)));
}

beforeAll(() => {
  if (missing !== undefined) return;
  // The prepack build on a copy of what it reads, so the repository's own dist/ stays as it is.
  const staging = join(temp, "staging");
  for (const path of [".ci", "src", "ffi", "package.json", "tsconfig.json", "tsconfig.build.json", "CHANGELOG.md"]) {
    cpSync(join(root, path), join(staging, path), { recursive: true });
  }
  symlinkSync(join(root, "node_modules"), join(staging, "node_modules"));
  // Node runs the build, as `npm pack` does (the pinned one, as test/all.ts picks it).
  const node = existsSync(join(root, "node_modules/.bin/node")) ? join(root, "node_modules/.bin/node") : "node";
  execFileSync(node, [join(staging, ".ci/build.ts")], { stdio: "pipe" });

  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { name: string; files: string[] };
  mkdirSync(join(project, "node_modules"), { recursive: true });
  writeFileSync(
    join(project, "package.json"),
    JSON.stringify({ type: "module", dependencies: { "memlife-a": "*", "memlife-b": "*" } }),
  );
  for (const name of ["memlife-a", "memlife-b"]) {
    const dir = join(project, "node_modules", name);
    for (const path of pkg.files) {
      const from = existsSync(join(staging, path)) ? join(staging, path) : join(root, path);
      cpSync(from, join(dir, path), { recursive: true });
    }
    writeFileSync(join(dir, "package.json"), JSON.stringify({ ...pkg, name }, null, 2));
  }
  symlinkSync(join(root, "node_modules", "koffi"), join(project, "node_modules", "koffi"));
  cpSync(fileURLToPath(new URL("./fixtures/duplicate-package.ts", import.meta.url)), join(project, "main.ts"));
});

function program(mode: string) {
  if (missing !== undefined) skip(missing);
  return runScript(join(project, "main.ts"), [mode], { cwd: project, timeout: 30_000 });
}

interface CopyReport {
  destroyedOnce: number;
  freedOnce: number;
  monitorCalls: number;
  bytes: number;
  liveBefore: number;
  liveAfter: number;
}

describe("two copies of the package in one process, a duplicated dependency (child processes; tested, not a README promise)", () => {
  test(
    "both at once: every destructor and onFree once per copy, each monitor called, 0 bytes and the live objects back after releases; each copy refuses the other's objects with a TypeError",
    async () => {
      const r = await program("both");
      const out = `${r.stdout}${r.stderr}`.trim().slice(-3000);
      assert.equal(r.timedOut, false, `hung\n${out}`);
      assert.equal(r.signal, null, `killed by ${r.signal}\n${out}`);
      assert.equal(r.code, 0, `exit code ${r.code}\n${out}`);
      const report = JSON.parse(r.stdout.trim().split("\n").at(-1)!) as {
        skip?: string;
        a: CopyReport;
        b: CopyReport;
        crossed: Record<string, string>;
        afterCross: { readBack: number; svmFreed: number; liveA: number; liveB: number };
      };
      if (report.skip) skip(report.skip);
      for (const copy of ["a", "b"] as const) {
        const c = report[copy];
        const what = `copy ${copy}: ${JSON.stringify(c)}`;
        assert.equal(c.destroyedOnce, 400, what);
        assert.equal(c.freedOnce, 400, what);
        assert.ok(c.monitorCalls > 0, what);
        assert.equal(c.bytes, 0, what);
        assert.equal(c.liveAfter, c.liveBefore, what);
      }
      assert.equal(Object.keys(report.crossed).length, 11, JSON.stringify(report.crossed));
      for (const [call, outcome] of Object.entries(report.crossed)) {
        assert.match(outcome, /^(rejected )?TypeError: /, `${call}: ${outcome}`);
      }
      // The objects handed over stay their own copy's, and work there.
      assert.deepEqual(report.afterCross, { readBack: 7, svmFreed: 1, liveA: 1, liveB: 1 });
    },
    90_000,
  );

  test("process.exit(3) while both copies' 300 000-triangle commits run: exit code 3, no signal, no hang", async () => {
    const r = await program("exit");
    const out = `${r.stdout}${r.stderr}`.trim().slice(-3000);
    assert.equal(r.timedOut, false, `hung\n${out}`);
    assert.equal(r.signal, null, `killed by ${r.signal}\n${out}`);
    assert.equal(r.code, 3, `exit code ${r.code}\n${out}`);
    assert.equal(r.stdout.trim().split("\n").at(-1), '{"inFlight":2}', `both commits were running at the exit\n${out}`);
  }, 60_000);
});
