// Hostile uses of the deferred calls (ffi/deferred.c): destructor and event callbacks PoCL makes on
// the JS thread inside clReleaseMemObject and clSetUserEventStatus, queued and run as the call
// returns. Each mode of test/fixtures/deferred-hostile.ts runs in a child process.
import { describe, test } from "vitest";
import { assert, runScript } from "./helpers.ts";

const modes: Record<string, string> = {
  "mass-release-in-destructor":
    "a destructor callback releasing 5000 buffers with destructors: each runs once, in release order",
  "recursive-nesting":
    "destructor callbacks that create and release a buffer with a destructor, 2000 deep: each runs once",
  "throw-anything":
    "900 destructor callbacks throwing undefined, null, strings, symbols, Errors: each reported once, in order",
  "user-event-fail": "a user event failed with -5 behind 3000 markers and writes with wait()s: every wait settles",
  "release-everything-in-destructor":
    "a destructor callback releasing a kernel, program, queue, context and 200 buffers",
  "exit-in-destructor": "process.exit in the 50th of 100 destructor callbacks queued in one call ends the program",
  "edge-release":
    "6000 buffers with destructors released at the edge of the stack, then again: no crash, no callback run twice",
  "edge-exactly-once":
    "buffers released at the edge of the stack: a release that returned runs its destructor once, and liveObjects comes back to 0",
};

describe("deferred calls, hostile uses (child processes)", () => {
  for (const [mode, what] of Object.entries(modes)) {
    test(`${mode}: ${what}`, async () => {
      const r = await runScript(new URL("./fixtures/deferred-hostile.ts", import.meta.url), [mode], {
        timeout: 60_000,
      });
      const out = `${r.stdout}${r.stderr}`.trim().slice(-2000);
      assert.equal(r.timedOut, false, `hung:\n${out}`);
      assert.equal(r.signal, null, out);
      assert.equal(r.code, 0, out);
      assert.match(r.stdout.trim().split("\n").at(-1) ?? "", /^ok/, out);
    }, 70_000);
  }
});
