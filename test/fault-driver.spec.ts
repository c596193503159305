// An OpenCL driver that fails one call (test/native/fault-driver.c, as OPENCL_LIBRARY): every
// failure reaches the program as an OpenCLError (or onCallbackError where no caller waits), and
// leaves nothing behind natively, no half-released object, nothing uncaught. Each case runs
// test/fixtures/fault-driver.ts in a child process. From a hostile pass (a fault-injecting driver):
// each case failed before its fix.
import { afterAll, describe, test } from "vitest";
import { assert, buildShim, openclLoader, runScript, skip } from "./helpers.ts";

const driver = buildShim("fault-driver", openclLoader());
afterAll(() => {
  if ("cleanup" in driver) driver.cleanup();
});

async function withFailure(name: string, fn: string, code?: string, count = 1): Promise<Record<string, unknown>> {
  if ("skip" in driver) skip(driver.skip);
  const r = await runScript(new URL("./fixtures/fault-driver.ts", import.meta.url), [name], {
    timeout: 30_000,
    env: {
      OPENCL_LIBRARY: driver.path,
      MEMLIFE_FAIL_FN: fn,
      MEMLIFE_FAIL_NTH: "1",
      MEMLIFE_FAIL_COUNT: String(count),
      ...(code === undefined ? {} : { MEMLIFE_FAIL_CODE: code }),
    },
  });
  const out = `${r.stdout}${r.stderr}`.trim().slice(-2000);
  assert.equal(r.timedOut, false, `hung:\n${out}`);
  assert.equal(r.signal, null, out);
  assert.equal(r.code, 0, `uncaught, or a wrong exit:\n${out}`);
  const report = JSON.parse(r.stdout.trim().split("\n").at(-1)!) as Record<string, unknown>;
  assert.equal(
    code === "pocl5" ? report.injected !== 0 : report.injected === count,
    true,
    `the driver's failure did not happen: ${out}`,
  );
  assert.equal(report.live, 0, `left behind natively: ${out}`);
  assert.deepEqual(report.reported, [], out);
  return report;
}

describe("a driver that fails one call", () => {
  test(
    'clSetMemObjectDestructorCallback, for a hostPtr "use" buffer: createBuffer throws, and the buffer is released',
    async () => {
      const r = await withFailure("use-buffer", "clSetMemObjectDestructorCallback");
      assert.equal(r.threw, "clSetMemObjectDestructorCallback CL_OUT_OF_RESOURCES");
      assert.equal(r.liveAfterFailure, 0, "the cl_mem leaked, and its context with it");
    },
    40_000,
  );

  test(
    "clSetMemObjectDestructorCallback, for `destroyed`: a rejected promise, not a throw; a later callback still works",
    async () => {
      const r = await withFailure("destroyed", "clSetMemObjectDestructorCallback");
      assert.equal(r.getterThrew, undefined, "the getter threw");
      assert.equal(r.rejected, "clSetMemObjectDestructorCallback CL_OUT_OF_RESOURCES");
      assert.equal(r.callbackRan, true);
    },
    40_000,
  );

  test("clGetEventInfo, as a user event's last release checks its status: the release still happens", async () => {
    const r = await withFailure("user-event", "clGetEventInfo");
    assert.equal(r.threw, false, "release() threw halfway, leaving the event and its context");
  }, 40_000);

  test("clGetEventInfo, as the safety net releases a dropped user event: released, nothing uncaught", async () => {
    await withFailure("user-event-dropped", "clGetEventInfo");
  }, 40_000);

  test(
    "clSetEventCallback, as memlife arms a completion callback from a timer: nothing uncaught, what the command used is let go",
    async () => {
      const r = await withFailure("arm", "clSetEventCallback");
      assert.equal(r.commandsInFlight, 0);
    },
    40_000,
  );

  test(
    "clRetainEvent, as an enqueue pins what its command uses: the enqueue returns its event (the command was enqueued)",
    async () => {
      const r = await withFailure("retain", "clRetainEvent");
      assert.equal(r.threw, false, "the enqueue threw though its command ran");
      assert.equal(r.commandsInFlight, 0);
    },
    40_000,
  );

  test(
    "CL_KERNEL_LOCAL_MEM_SIZE without the __local arguments (PoCL 5.0): two cl.local() of 0.6x the device's are refused before the enqueue, where PoCL aborted",
    async () => {
      const r = await withFailure("local-uncounted", "clGetKernelWorkGroupInfo", "pocl5");
      assert.equal(r.threw, "RangeError");
    },
    40_000,
  );

  test("clRetainEvent, with the queue released at once: what the command used is still let go", async () => {
    const r = await withFailure("retain-released-queue", "clRetainEvent");
    assert.equal(r.commandsInFlight, 0, "the released allocation stayed in use for good");
  }, 40_000);

  test(
    "clSVMAlloc returns NULL once, as NVIDIA's does now and then when threads allocate at once: asked again, the allocation is made",
    async () => {
      const r = await withFailure("svm-null", "clSVMAlloc");
      assert.equal(r.threw, false, String(r.message));
      assert.equal(r.againAlive, true);
    },
    40_000,
  );

  test(
    "clSVMAlloc returns NULL every time (it has no error code): an OpenCLError CL_MEM_OBJECT_ALLOCATION_FAILURE naming clSVMAlloc, with a sentence; the next allocation works",
    async () => {
      const r = await withFailure("svm-null", "clSVMAlloc", undefined, 4);
      assert.equal(r.threw, "clSVMAlloc CL_MEM_OBJECT_ALLOCATION_FAILURE");
      assert.match(String(r.message), /NULL/);
      assert.equal(r.againAlive, true);
    },
    40_000,
  );
});

describe("clSVMAlloc and clSVMFree, one at a time in the whole process", () => {
  // The word is found through the environment (ffi/process-lock.ts): a child process inherits the
  // variable, with its parent's pid, and must make a word of its own.
  test.each([
    ["", {}],
    // 4194305: above the largest pid_max Linux allows, no process has it.
    [", with another process's word in the environment", { MEMLIFE_PROCESS_WORD: "4194305:7f0000001000" }],
    [", with a malformed one", { MEMLIFE_PROCESS_WORD: `${"f".repeat(40)}:zz` }],
  ])(
    "four Workers allocating and freeing at once never overlap in the driver (NVIDIA's SVM allocator is not thread-safe)%s",
    async (_, extra: Record<string, string>) => {
      if ("skip" in driver) skip(driver.skip);
      const r = await runScript(new URL("./fixtures/svm-threads.ts", import.meta.url), [], {
        timeout: 60_000,
        env: { OPENCL_LIBRARY: driver.path, MEMLIFE_SVM_OVERLAP: "1", MEMLIFE_ALLOW_WORKERS: "1", ...extra },
      });
      const out = `${r.stdout}${r.stderr}`.trim().slice(-2000);
      assert.equal(r.timedOut, false, `hung:\n${out}`);
      assert.equal(r.code, 0, out);
      const report = JSON.parse(r.stdout.trim().split("\n").at(-1)!) as Record<string, unknown>;
      assert.deepEqual(report.errors, [], out);
      // More on NVIDIA: its clSVMAlloc still returns a NULL now and then there, asked again (`askAgain`).
      assert.ok(
        (report.allocations as number) >= (report.expected as number),
        `not every allocation reached the driver: ${out}`,
      );
      assert.equal(report.overlaps, 0, `calls overlapped in the driver: ${out}`);
    },
    70_000,
  );

  test(
    "a word held for good (a Worker terminated inside the call) is taken anyway after a while: a stall, not a hang",
    async () => {
      if ("skip" in driver) skip(driver.skip);
      const r = await runScript(new URL("./fixtures/svm-threads.ts", import.meta.url), ["stale"], {
        timeout: 30_000,
        env: { OPENCL_LIBRARY: driver.path, MEMLIFE_SVM_OVERLAP: "1" },
      });
      const out = `${r.stdout}${r.stderr}`.trim().slice(-2000);
      assert.equal(r.timedOut, false, `hung:\n${out}`);
      assert.equal(r.code, 0, out);
      const report = JSON.parse(r.stdout.trim().split("\n").at(-1)!) as { held: number; ms: number };
      assert.equal(report.held, 0, `the word was not let go after the call: ${out}`);
    },
    40_000,
  );
});
