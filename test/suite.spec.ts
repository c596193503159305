// What test/all.ts guarantees around vitest, on the runtime this file runs on, shown with the spec
// files of test/fixtures/suite/ that fail on purpose, run once by test/all.ts in a child: a crash
// fails its own file only, a file that blocks the JS thread is killed at its time limit and the
// run goes on, a file that does not exit after its result fails, and skips count as skips.
import { beforeAll, describe, test } from "vitest";
import { assert, runScript, runtime, type ScriptResult } from "./helpers.ts";

describe("test/all.ts on the fixtures that fail on purpose", () => {
  let run: ScriptResult;
  beforeAll(async () => {
    run = await runScript(new URL("./all.ts", import.meta.url), [
      "--fixtures",
      `--runtime=${runtime}`,
      "--timeout=5",
      "--grace=2",
    ], {
      timeout: 55_000,
    });
  }, 60_000);
  const line = (file: string) =>
    run.stdout.split("\n").find((l) => l.includes(` fixtures/suite/${file}.spec.ts: `)) ??
      `(no line for ${file})\n${run.stdout}\n${run.stderr}`;
  const counts = (file: string) => {
    const m = /^FAIL (?:bun |deno|node) [^:]+: (\d+) passed, (\d+) failed, (\d+) skipped/.exec(line(file));
    assert.ok(m, line(file));
    return { passed: Number(m[1]), failed: Number(m[2]), skipped: Number(m[3]) };
  };

  test("a crashing file fails, with its unfinished tests, and the files after it still run", () => {
    assert.ok(counts("crash").failed >= 2, line("crash"));
    // counts() finds each file's own FAIL line: every file ran after the crash.
    for (const file of ["hang", "linger", "skipping"]) counts(file);
    assert.equal(run.code, 1, run.stderr);
    assert.match(run.stdout.trimEnd().split("\n").pop()!, /^\d+ passed, \d+ failed, 3 skipped$/);
  });

  test("a file that blocks its JS thread is killed at its time limit; its unfinished tests fail", () => {
    assert.ok(counts("hang").failed >= 2, line("hang"));
    assert.match(run.stdout, /!! killed at the 5 s time limit and no result line/);
  });

  test("a file whose tests all passed but whose process does not go away fails after the grace period", () => {
    assert.deepEqual(counts("linger"), { passed: 1, failed: 1, skipped: 0 });
    assert.match(run.stdout, /!! did not exit within 2 s of its result line/);
  });

  test("skips count as skips, each with its reason, even when the test caught the skip", () => {
    // The fixture's .skip test is not selected: it counts as nothing.
    assert.deepEqual(counts("skipping"), { passed: 1, failed: 1, skipped: 3 });
    assert.match(run.stdout, /^ {4}skip skips: no such capability$/m);
    assert.match(run.stdout, /^ {4}skip skips even when the test catches the signal: caught but still skipped$/m);
    assert.match(run.stdout, /^ {4}skip skips through the test context: the context's own skip$/m);
  });
});
