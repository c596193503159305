// enqueueSVMFree of an allocation that a command of another queue still uses (DESIGN §7: what an
// enqueued command uses stays alive natively until it is done; §6: nothing crashes). Found by a
// hostile pass: a kernel behind a closed user event on queue A, the allocation freed on queue B
// without a wait list: the free completed at once, and the kernel then wrote 64 MiB into freed
// memory (SIGSEGV on Bun, Deno and Node). Each case runs test/fixtures/svm-free-other-queue.ts.
import { describe, test } from "vitest";
import { assert, runScript, skip } from "./helpers.ts";

async function child(mode: string): Promise<Record<string, unknown>> {
  const r = await runScript(new URL("./fixtures/svm-free-other-queue.ts", import.meta.url), [mode], {
    timeout: 30_000,
  });
  const out = `${r.stdout}${r.stderr}`.trim().slice(-2000);
  assert.equal(r.timedOut, false, `${mode}: hung\n${out}`);
  assert.equal(r.signal, null, `${mode}: killed by ${r.signal} (the command ran on freed memory)\n${out}`);
  assert.equal(r.code, 0, `${mode}: exit code ${r.code}\n${out}`);
  const report = JSON.parse(r.stdout.trim().split("\n").at(-1)!) as Record<string, unknown>;
  if (report.skip) skip(String(report.skip));
  assert.equal(report.liveObjects, 0, out);
  return report;
}

describe("enqueueSVMFree of an allocation a command of another queue uses (child processes)", () => {
  const refused = {
    free: "clEnqueueSVMFree CL_INVALID_OPERATION",
    aliveAfterFree: true,
    freedAfterwards: true,
    onFreeRan: false,
  };
  for (
    const [mode, what] of [
      ["kernel", "a kernel argument"],
      ["kernel-onfree", "a kernel argument, the free with onFree"],
      ["memcpy", "an SVM copy's source"],
      ["unmap", "an unmap (the mapping holds it until the unmap completed)"],
    ]
  ) {
    test(
      `${what}, gated: without waitFor the free is refused before the native call, the allocation stays the program's, and frees once the command ended`,
      async () => {
        const report = await child(mode);
        assert.deepEqual({ ...report, mode: undefined, liveObjects: undefined }, {
          ...refused,
          mode: undefined,
          liveObjects: undefined,
        });
      },
      40_000,
    );
  }

  test(
    "with the command's event as waitFor (the README's advice) the free is taken, and waits for the command",
    async () => {
      const report = await child("kernel-waitfor");
      assert.equal(report.free, "accepted");
      assert.equal(report.aliveAfterFree, false, "handed to the free");
      assert.notEqual(report.freeStatusBeforeGate, 0, "the free completed before the command it waits for");
    },
    40_000,
  );
});
