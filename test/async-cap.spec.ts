// README, "Async calls are capped and queued, in call order: 64 at once on Node (koffi refuses more
// than 256 and crashes when callbacks from native threads find no room), 256 on Bun (one lane
// each) ... Deno's nonblocking calls run on at most 32 threads and wait in Deno's own unbounded
// queue past that, so memlife adds no cap there ... a release is never refused." 300 calls that
// block in C until a gate opens (test/native/gate-calls.c) count how many the backend let in at
// once; Node gets a libuv pool of 128 threads, so that only memlife's cap can stop it at 64.
import { afterAll, describe, test } from "vitest";
import { assert, buildShim, runScript, runtime, skip } from "./helpers.ts";

const gateCalls = buildShim("gate-calls", "-lpthread");
afterAll(() => {
  if ("cleanup" in gateCalls) gateCalls.cleanup();
});

describe("asynchronous native calls at once", () => {
  test(
    `300 blocking calls: ${
      runtime === "node" ? "64" : runtime === "bun" ? "256" : "Deno's own pool's"
    } run at once, the rest wait; releases made meanwhile wait their turn, a wait() settles; all 300 settle (child process)`,
    async () => {
      if ("skip" in gateCalls) return skip(gateCalls.skip);
      const r = await runScript(new URL("./fixtures/async-cap.ts", import.meta.url), ["300"], {
        env: { MEMLIFE_GATE_CALLS: gateCalls.path, UV_THREADPOOL_SIZE: "128" },
        timeout: 60_000,
      });
      const out = `${r.stdout}${r.stderr}`.trim().slice(-2000);
      assert.equal(r.timedOut, false, `hung:\n${out}`);
      assert.equal(r.signal, null, out);
      assert.equal(r.code, 0, out);
      const report = JSON.parse(r.stdout.trim().split("\n").at(-1)!) as Record<string, unknown>;
      assert.equal(report.settled, 300, out);
      assert.deepEqual(report.rejected, [], "no call refused");
      assert.equal(report.liveObjects, 0, "the queue and context released while every slot was taken");
      const cap = { node: 64, bun: 256 }[runtime as string];
      if (cap !== undefined) {
        assert.equal(report.most, cap, `at most ${cap} at once, and that many: ${out}`);
      } else {
        // Deno: memlife adds no cap; Deno's pool decides (32 threads here), and more than one runs.
        assert.ok(Number(report.most) > 1 && Number(report.most) < 300, out);
      }
    },
    70_000,
  );
});
