// One rule for exceptions thrown by the Embree memory monitor (DESIGN semantics 1 and 4): any value
// thrown refuses the allocation, and reaches the program exactly once: as the `cause` of the
// operation's EmbreeError when there is one, else through onCallbackError, else as an uncaught
// exception. Every scenario runs in its own child process (test/fixtures/monitor-throw.ts): a
// second delivery by default is an uncaught exception, which ends that process.
import { describe, test } from "vitest";
import { assert, runScript } from "./helpers.ts";

const fixture = new URL("./fixtures/monitor-throw.ts", import.meta.url);

async function scenario(
  mode: string,
  handler = false,
): Promise<{ code: number | null; report: Record<string, unknown>; stderr: string }> {
  const result = await runScript(fixture, handler ? [mode, "handler"] : [mode], { timeout: 60_000 });
  assert.equal(result.timedOut, false, `${mode}: the child hung`);
  assert.equal(result.signal, null, `${mode}: killed by ${result.signal}: ${result.stderr}`);
  const line = result.stdout.trim().split("\n").pop() ?? "";
  let report: Record<string, unknown> = {};
  try {
    report = JSON.parse(line);
  } catch {
    // No report: the exit code and stderr say why.
  }
  return { code: result.code, report, stderr: result.stderr };
}

describe("a throwing monitor", () => {
  test(
    "a commit the program awaits and catches: rejects with the thrown value as cause, and the program lives on",
    async () => {
      for (const handler of [false, true]) {
        const { code, report, stderr } = await scenario("error", handler);
        assert.equal(code, 0, `handler ${handler}: ${stderr}`);
        assert.equal(report.settled, "EmbreeError");
        assert.equal(report.fn, "rtcCommitScene");
        assert.equal(report.codeName, "RTC_ERROR_OUT_OF_MEMORY");
        assert.equal(report.causeIsThrown, true);
        // Delivered through the promise: not to onCallbackError as well.
        assert.deepEqual(report.reported, []);
      }
    },
    130_000,
  );

  test("any value thrown refuses (undefined, null, 0, a string), and is the cause", async () => {
    for (const mode of ["undefined", "null", "zero", "string"]) {
      const { code, report, stderr } = await scenario(mode);
      assert.equal(code, 0, `${mode}: ${stderr}`);
      assert.equal(report.codeName, "RTC_ERROR_OUT_OF_MEMORY", mode);
      assert.equal(report.hasCause, true, `${mode}: the error has a cause property`);
      assert.equal(report.causeIsThrown, true, mode);
      assert.deepEqual(report.reported, [], mode);
    }
  }, 250_000);

  test("a fresh exception per call: the first is the cause, any other reaches onCallbackError once", async () => {
    const { code, report, stderr } = await scenario("distinct", true);
    assert.equal(code, 0, stderr);
    assert.equal(report.cause, "Error(no 1)");
    const thrown = report.thrown as number;
    const reported = report.reported as string[];
    assert.ok(thrown > 1, "the monitor threw more than once (frees included)");
    assert.equal(reported.length, thrown - 1);
    assert.deepEqual(reported, Array.from({ length: thrown - 1 }, (_, i) => `memoryMonitor:Error(no ${i + 2})`));
  }, 70_000);

  test("addTriangleMesh (synchronous allocation) throws the EmbreeError with the cause, nothing else", async () => {
    for (const handler of [false, true]) {
      const { code, report, stderr } = await scenario("mesh", handler);
      assert.equal(code, 0, stderr);
      assert.equal(report.fn, "rtcSetNewGeometryBuffer");
      assert.equal(report.codeName, "RTC_ERROR_OUT_OF_MEMORY");
      assert.equal(report.causeIsThrown, true);
      assert.deepEqual(report.reported, []);
    }
  }, 130_000);

  test(
    "one exception thrown at an allocation and again at the frees of addTriangleMesh's cleanup reaches the program once, as the cause",
    async () => {
      // No onCallbackError: a second delivery would be an uncaught exception, ending the child with 1.
      const result = await runScript(new URL("./fixtures/embree-hostile.ts", import.meta.url), ["same-exception"], {
        timeout: 60_000,
      });
      assert.equal(result.signal, null, result.stderr);
      assert.equal(result.code, 0, result.stderr);
      const report = JSON.parse(result.stdout.trim().split("\n").pop()!);
      assert.equal(report.caught, "RTC_ERROR_OUT_OF_MEMORY");
      assert.equal(report.causeIsThrown, true);
    },
    70_000,
  );

  test(
    "a throw while release() frees: release does not throw; each exception reaches onCallbackError once",
    async () => {
      const { code, report, stderr } = await scenario("release", true);
      assert.equal(code, 0, stderr);
      assert.equal(report.settled, "ok", "release() did not throw");
      const thrown = report.thrown as number;
      assert.ok(thrown > 0, "Embree freed memory through the monitor");
      assert.deepEqual(
        report.reported,
        Array.from({ length: thrown }, (_, i) => `memoryMonitor:Error(while freeing ${i + 1})`),
      );
    },
    70_000,
  );

  test("with no onCallbackError, a throw that no operation carries is an uncaught exception", async () => {
    const { code, stderr } = await scenario("release");
    assert.notEqual(code, 0);
    assert.match(stderr, /while freeing 1/);
  }, 70_000);
});

describe("monitors that misbehave otherwise", () => {
  test("returning a Promise allows; its rejection reaches onCallbackError once", async () => {
    const { code, report, stderr } = await scenario("promise", true);
    assert.equal(code, 0, stderr);
    assert.equal(report.settled, "ok");
    assert.deepEqual(report.reported, ["memoryMonitor:Error(async monitor)"]);
  }, 70_000);

  test("with no onCallbackError, a returned promise's rejection is an uncaught exception, not swallowed", async () => {
    const { code, stderr } = await scenario("promise");
    assert.notEqual(code, 0, "the rejection ended the program, as an uncaught exception does");
    assert.equal(stderr.split("async monitor").length - 1, 1, `reported once: ${stderr}`);
  }, 70_000);

  test(
    "returning a thenable whose then (or its getter) throws allows; each failure reaches onCallbackError once",
    async () => {
      const { code, report, stderr } = await scenario("thenable", true);
      assert.equal(code, 0, stderr);
      assert.equal(report.settled, "ok");
      assert.deepEqual(report.reported, [
        "memoryMonitor:Error(then threw)",
        "memoryMonitor:Error(then getter threw)",
        "memoryMonitor:Error(first)",
      ]);
    },
    70_000,
  );

  test(
    "returning a promise whose constructor getter throws allows, inside addTriangleMesh and from a TBB worker; each failure reaches onCallbackError once",
    async () => {
      const { code, report, stderr } = await scenario("promise-constructor", true);
      assert.equal(code, 0, stderr);
      assert.equal(report.mesh, "ok");
      assert.equal(report.settled, "ok");
      assert.equal(report.returned, 2);
      assert.deepEqual(report.reported, [
        "memoryMonitor:Error(constructor getter threw)",
        "memoryMonitor:Error(constructor getter threw)",
      ]);
    },
    70_000,
  );

  test("re-entering memlife (device.memory, newScene, release) inside the monitor", async () => {
    const { code, report, stderr } = await scenario("reenter");
    assert.equal(code, 0, stderr);
    assert.equal(report.settled, "ok");
    assert.equal(report.inner, true);
    assert.equal(report.intersects, true);
  }, 70_000);

  test("process.exit(5) inside the monitor, during a commit and inside addTriangleMesh, exits with 5", async () => {
    for (const mode of ["exit-commit", "exit-mesh"]) {
      for (let run = 0; run < 3; run++) {
        const { code, report, stderr } = await scenario(mode);
        assert.equal(code, 5, `${mode}: ${stderr}`);
        assert.equal(report.notExited, undefined);
      }
    }
  }, 250_000);
});
