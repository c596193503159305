// memlife's modules evaluated more than once in one Node process from the same files: what Jest
// does (a module registry per test file, in one worker process), and vitest's vmThreads and
// vmForks pools. Each evaluation is a copy with its own JS state, while koffi's addon and the
// native libraries at one path are loaded once per process. test/fixtures/module-copies.ts makes
// the second copy with a resolve hook (`?copy=b` on every module it imports); child processes.
import { describe, test } from "vitest";
import { assert, runScript, runtime, skip } from "./helpers.ts";

const fixture = new URL("./fixtures/module-copies.ts", import.meta.url);

function nodeOnly(): void {
  // Jest runs on Node only; Bun has no resolve hooks of this kind and Deno none at all.
  if (runtime !== "node") skip("Jest's module registry per test file is Node's (module.registerHooks)");
}

describe("two evaluations of memlife in one Node process (Jest's registry per test file)", () => {
  test(
    "each copy's commits settle, each only once its own build ended (copy b loaded while copy a's ran)",
    async () => {
      nodeOnly();
      const r = await runScript(fixture, ["commits"], { timeout: 40_000 });
      const out = `${r.stdout}${r.stderr}`.trim().slice(-3000);
      assert.equal(r.timedOut, false, `hung\n${out}`);
      assert.equal(r.code, 0, out);
      const report = JSON.parse(r.stdout.trim().split("\n").at(-1)!) as {
        states: Record<string, string>;
        settledBeforeTheirBuildEnded: string[];
      };
      assert.deepEqual(report.states, { a0: "settled", a1: "settled", b0: "settled", b1: "settled" }, out);
      assert.deepEqual(report.settledBeforeTheirBuildEnded, [], out);
    },
    60_000,
  );

  test(
    "with globalThis.process a per-context copy (Jest's test environment), the exit guard is on the real process",
    async () => {
      nodeOnly();
      const r = await runScript(fixture, ["exit-guard"], { timeout: 30_000 });
      const out = `${r.stdout}${r.stderr}`.trim().slice(-3000);
      assert.equal(r.code, 0, out);
      const report = JSON.parse(r.stdout.trim().split("\n").at(-1)!) as { real: string[]; copy: string[] };
      assert.ok(report.real.includes("onExit"), `memlife's exit listener is not on the real process: ${out}`);
    },
    40_000,
  );
});
