// DESIGN §5, "Nothing deadlocks": callbacks from PoCL's worker threads (destructors of buffers a
// command held last, onFree, completion callbacks of wait() and finish()) arrive while the JS
// thread is busy in synchronous memlife calls on the same context and queues, with a queue
// released and a finish() made while its commands run. On Deno a callback from another thread
// waits until the JS thread ran it, so a call that blocked the JS thread on those workers (a
// finish() made a clFinish) hangs there: the child is killed and the test fails. Also with
// test/native/thread-driver.c, whose own thread makes the destructor calls, as NVIDIA's do.
import { afterAll, describe, test } from "vitest";
import { assert, buildShim, openclLoader, runScript, skip } from "./helpers.ts";

const fixture = new URL("./fixtures/busy-js-thread.ts", import.meta.url);
const threadDriver = buildShim("thread-driver", openclLoader());
afterAll(() => {
  if ("cleanup" in threadDriver) threadDriver.cleanup();
});

async function run(env: Record<string, string>): Promise<void> {
  const rounds = 200;
  const r = await runScript(fixture, [String(rounds)], { env, timeout: 60_000 });
  const out = `${r.stdout}${r.stderr}`.trim().slice(-2000);
  assert.equal(r.timedOut, false, `hung (a deadlock):\n${out}`);
  assert.equal(r.signal, null, out);
  assert.equal(r.code, 0, out);
  const report = JSON.parse(r.stdout.trim().split("\n").at(-1)!) as Record<string, number>;
  assert.equal(report.rounds, rounds);
  assert.equal(report.liveObjects, 0);
}

describe("callbacks from other threads while the JS thread is busy in synchronous calls", () => {
  test(
    "PoCL's workers: 200 rounds of 9 gated commands opened, a queue released and finish() made mid-run, 140 synchronous calls each (child process)",
    async () => {
      await run({});
    },
    70_000,
  );

  test("the same with destructors from a driver thread (thread-driver.c) (child process)", async () => {
    if ("skip" in threadDriver) return skip(threadDriver.skip);
    await run({ OPENCL_LIBRARY: threadDriver.path });
  }, 70_000);
});
