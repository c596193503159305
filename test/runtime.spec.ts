// The test helpers, on each runtime: runtime detection, gc(), withTimeout(), runScript() exit codes
// (skip() and what test/all.ts guarantees: test/suite.spec.ts).
import process from "node:process";
import { describe, test } from "vitest";
import { assert, gc, runScript, runtime, sleep, withTimeout } from "./helpers.ts";

describe("helpers", () => {
  test("runtime names the runtime this process runs on", () => {
    // Detected independently of helpers.ts: Bun and Deno also define process.versions.node.
    const g = globalThis as { Bun?: unknown; Deno?: unknown };
    const actual = typeof g.Bun !== "undefined" ? "bun" : typeof g.Deno !== "undefined" ? "deno" : "node";
    assert.equal(runtime, actual);
    if (actual === "node") assert.ok(Number(process.versions.node.split(".")[0]) >= 22);
  });

  test("gc() forces a collection: a dropped object's FinalizationRegistry callback runs", async () => {
    let collected = false;
    const registry = new FinalizationRegistry(() => (collected = true));
    (() => registry.register({ payload: new Uint8Array(1024) }, "x"))();
    for (let i = 0; i < 20 && !collected; i++) {
      gc();
      await sleep(10); // finalizers run from the event loop, not inside gc()
    }
    assert.ok(collected, "the finalizer did not run after 20 full collections");
  });

  test("withTimeout rejects a promise that never settles", async () => {
    await assert.rejects(withTimeout(new Promise(() => {}), 20, "never"), /never did not settle within 20 ms/);
  });

  test("runScript: a child of the same runtime that exits 3 gives code 3", async () => {
    const r = await runScript(new URL("./fixtures/exit-code.ts", import.meta.url), ["3"], { timeout: 20_000 });
    assert.equal(r.timedOut, false);
    assert.equal(r.signal, null);
    assert.equal(r.code, 3, `stderr: ${r.stderr}`);
    assert.equal(r.stdout.trim(), "exiting with 3");
  }, 30_000);
});
