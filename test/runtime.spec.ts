// The harness itself, on each runtime: runtime detection, gc(), skip() as test/run.ts counts it, runScript() exit codes.
import process from "node:process";
import { fileURLToPath } from "node:url";
import { assert, describe, gc, runScript, runtime, sleep, test, withTimeout } from "./harness.ts";

describe("harness", () => {
  test("runtime names the runtime this process runs on", () => {
    // Detected independently of the harness: Bun and Deno also define process.versions.node.
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

  test("test/run.ts counts skips apart from passes and failures, and exits 1 on a failure", async () => {
    const spec = fileURLToPath(new URL("./fixtures/skipping-tests.ts", import.meta.url));
    const r = await runScript(new URL("./run.ts", import.meta.url), [spec], { timeout: 20_000 });
    assert.equal(r.code, 1, `stderr: ${r.stderr}`);
    const lines = r.stdout.split("\n");
    assert.match(lines.find((l) => l.startsWith("skip 2/4")) ?? "", /skips: no such capability$/);
    assert.match(lines.find((l) => l.startsWith("skip 3/4")) ?? "", /caught but still skipped$/);
    assert.ok(lines.some((l) => l.startsWith("FAIL 4/4 fails")), r.stdout);
    assert.ok(lines.includes('@@result {"passed":1,"failed":1,"skipped":2}'), r.stdout);
  }, { timeout: 30_000 });

  test("withTimeout rejects a promise that never settles", async () => {
    await assert.rejects(withTimeout(new Promise(() => {}), 20, "never"), /never did not settle within 20 ms/);
  });

  test("runScript: a child of the same runtime that exits 3 gives code 3", async () => {
    const r = await runScript(new URL("./fixtures/exit-code.ts", import.meta.url), ["3"], { timeout: 20_000 });
    assert.equal(r.timedOut, false);
    assert.equal(r.signal, null);
    assert.equal(r.code, 3, `stderr: ${r.stderr}`);
    assert.equal(r.stdout.trim(), "exiting with 3");
  }, { timeout: 30_000 });
});
