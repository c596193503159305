// Contexts of TWO devices: every other spec runs on a context of one (PoCL on a small machine has
// one device, the GPU machine one GPU). PoCL makes several when POCL_DEVICES says so, read as the
// ICD loader loads it: each case runs test/fixtures/multi-device.ts in a child process with
// POCL_DEVICES="pthread pthread" (two devices of one driver) or "basic pthread" (two drivers in one
// context). Where the platform still gives one device (another driver, OPENCL_LIBRARY), skipped.
import { spawnSync } from "node:child_process";
import process from "node:process";
import { describe, test } from "vitest";
import { assert, runScript, skip } from "./helpers.ts";

const TWO = "pthread pthread";
const MIXED = "basic pthread";

async function child(mode: string, devices = TWO, timeout = 40_000): Promise<Record<string, unknown>> {
  const r = await runScript(new URL("./fixtures/multi-device.ts", import.meta.url), [mode], {
    env: { POCL_DEVICES: devices },
    timeout,
  });
  const out = `${r.stdout}${r.stderr}`.trim().slice(-2000);
  assert.equal(r.timedOut, false, `${mode}: hung\n${out}`);
  assert.equal(r.signal, null, `${mode}: killed by ${r.signal}\n${out}`);
  assert.equal(r.code, 0, `${mode}: exit code ${r.code}\n${out}`);
  const report = JSON.parse(r.stdout.trim().split("\n").at(-1)!) as Record<string, unknown>;
  if (report.skip) skip(String(report.skip));
  assert.equal(report.liveObjects, 0, `${mode}: memlife objects left (a leak)\n${out}`);
  return report;
}

/** PyOpenCL's answers on the same POCL_DEVICES, or why it cannot give them (then the test skips). */
function pyopencl(devices: string): Record<string, unknown> | string {
  const script = `
import json, pyopencl as cl
p = [p for p in cl.get_platforms() if len(p.get_devices()) >= 2][0]
d0, d1 = p.get_devices()[:2]
ctx = cl.Context([d0, d1])
prg = cl.Program(ctx, "__kernel void advance(__global int *x, int v) { x[get_global_id(0)] = v; }").build()
print(json.dumps({
  "names": [d0.name, d1.name],
  "devices": len(ctx.devices),
  "duplicate": len(cl.Context([d0, d0]).devices),
  "status": [prg.get_build_info(d, cl.program_build_info.STATUS) for d in (d0, d1)],
}))`;
  const r = spawnSync("/usr/bin/python3", ["-c", script], {
    env: { ...process.env, POCL_DEVICES: devices },
    encoding: "utf8",
    timeout: 60_000,
  });
  if (r.error !== undefined) return `no /usr/bin/python3 (${r.error.message})`;
  if (r.status !== 0) return `PyOpenCL did not run: ${r.stderr.trim().split("\n").at(-1)}`;
  return JSON.parse(r.stdout.trim().split("\n").at(-1)!) as Record<string, unknown>;
}

describe(`two devices of one driver (POCL_DEVICES="${TWO}", child processes)`, () => {
  test(
    "createContext([d0, d1]): both devices, in order, the platform's own objects; a duplicate is ignored as OpenCL says; bad lists and foreign devices are clear errors",
    async () => {
      const r = await child("context");
      assert.deepEqual(
        [r.devices, r.sameObjects, r.frozen, r.reversedOrder, r.duplicate, r.duplicateIsD0],
        [2, true, true, true, 1, true],
      );
      assert.deepEqual(
        [r.empty, r.notADevice, r.aContext, r.aBuffer, r.proxy, r.released],
        ["TypeError", "TypeError", "TypeError", "TypeError", "TypeError", "ReleasedError"],
      );
      assert.deepEqual(
        r.queueDevices,
        [true, true, true, true],
        "queue.device: d0, d1, the default (d0), the default of [d1, d0] (d1)",
      );
      assert.deepEqual([r.queueForeignDevice, r.queueNotADevice, r.queueProxyDevice], [
        "TypeError",
        "TypeError",
        "TypeError",
      ]);
      assert.equal(r.readOnOther, true, "written on d0's queue, read on d1's");
    },
    45_000,
  );

  test(
    "the same answers as PyOpenCL: device names and count, a duplicate device, build status per device",
    async () => {
      const r = await child("context");
      const py = pyopencl(TWO);
      if (typeof py === "string") skip(py);
      assert.deepEqual([r.names, r.devices, r.duplicate], [py.names, py.devices, py.duplicate]);
      const b = await child("build");
      assert.deepEqual(b.status, py.status, "after build() for both");
    },
    90_000,
  );

  test(
    "build('', [d1]): d0 has no executable, so its build status is CL_BUILD_NONE and a kernel enqueued on d0's queue is CL_INVALID_PROGRAM_EXECUTABLE (PoCL 3.1 said CL_BUILD_SUCCESS and aborted the process in the enqueue)",
    async () => {
      const r = await child("build-one");
      assert.deepEqual(r.statusBefore, [-1, -1]);
      assert.deepEqual(r.status, [-1, 0], "[d0, d1]");
      assert.deepEqual(r.logTypes, ["string", "string"]);
      assert.equal(r.ranOnBuilt, true);
      assert.equal(r.enqueueOnUnbuilt, "OpenCLError clEnqueueNDRangeKernel CL_INVALID_PROGRAM_EXECUTABLE");
      assert.equal(r.dataAfter, true, "nothing ran on d0");
    },
    45_000,
  );

  test(
    "a rebuild for d1 only (PoCL drops d0's executable): d0 refused the same way; a rebuild while a kernel exists is CL_INVALID_OPERATION",
    async () => {
      const r = await child("rebuild-narrower");
      assert.equal(r.rebuildWithKernel, "OpenCLError clBuildProgram CL_INVALID_OPERATION");
      assert.deepEqual(r.status, [-1, 0]);
      assert.equal(r.enqueueOnDropped, "OpenCLError clEnqueueNDRangeKernel CL_INVALID_PROGRAM_EXECUTABLE");
    },
    45_000,
  );

  test(
    "build() for both; a failure's buildLog has one entry per device given; kernel work-group info per device; a kernel run on each device's queue in turn, linked by waitFor, writes the right data",
    async () => {
      const r = await child("build");
      assert.equal(r.badBuild, "OpenCLError clBuildProgram CL_BUILD_PROGRAM_FAILURE");
      assert.deepEqual(r.badLogDevices, ["d0", "d1"]);
      assert.equal(r.badLogsMention, true, "the compiler's error is in the logs");
      assert.deepEqual(r.badLogTypes, ["string", "string"]);
      assert.deepEqual(r.badStatus, [-2, -2]);
      assert.deepEqual(r.badOneLogDevices, ["d1"], "build('', [d1]) failed: d1's log only");
      assert.equal(r.badKernel, "OpenCLError clCreateKernel CL_INVALID_PROGRAM_EXECUTABLE");
      assert.deepEqual([r.buildForeignDevice, r.buildEmptyList, r.buildNotADevice], [
        "TypeError",
        "TypeError",
        "TypeError",
      ]);
      assert.equal(r.buildTwice, "built", "[d1, d1]: OpenCL takes it");
      assert.deepEqual(r.status, [0, 0]);
      assert.deepEqual([r.logForeign, r.statusForeign], ["TypeError", "TypeError"]);
      assert.deepEqual(r.workGroupSizes, [true, true]);
      assert.deepEqual(r.preferredMultiples, [true, true]);
      assert.deepEqual(r.localMemSizes, [true, true]);
      assert.deepEqual(r.compileSizes, [[0, 0, 0], [0, 0, 0]]);
      assert.deepEqual([r.workGroupSizeForeign, r.kernelOtherContext], ["TypeError", "TypeError"]);
      assert.equal(r.heldByGate, true, "three commands on two queues held by one closed gate");
      assert.deepEqual(r.data, [122], "0 → 1 (d0) → 12 (d1) → 122 (d0): each in order");
    },
    45_000,
  );

  test(
    "buffers (hostPtr 'use' and plain) used by both queues, released while held back: each destructor runs once, after every command of both queues ended; destroyed resolves",
    async () => {
      const r = await child("buffers");
      assert.deepEqual(r.aliveAfterRelease, [false, false]);
      assert.equal(r.usedAfterRelease, "ReleasedError");
      assert.equal(r.callsBeforeGate, 0);
      assert.deepEqual(r.calls, ["plain 0,0,0", "used 0,0,0"], "once each, with the three commands CL_COMPLETE");
      assert.deepEqual(r.host, [3, 12], "the copy's 3 in the first 8 ints, 12 after");
    },
    45_000,
  );

  test(
    "SVM used by kernels on both devices: a free on d0's queue while d1's gated command uses it is refused; with that command as waitFor it waits for it; onFree runs once, after the data is final",
    async () => {
      const r = await child("svm");
      assert.equal(r.freeWithoutWaitFor, "OpenCLError clEnqueueSVMFree CL_INVALID_OPERATION");
      assert.equal(r.aliveAfterRefusal, true);
      assert.equal(r.aliveAfterFree, false);
      assert.equal(r.usedAfterFree, "ReleasedError");
      assert.equal(r.freeHeld, true, "the free did not complete before d1's command");
      assert.equal(r.onFreeBeforeGate, 0);
      assert.equal(r.onFreeGot, true);
      if (r.fine) assert.deepEqual(r.dataAtFree, [12], "both kernels ran before the free");
      assert.deepEqual([r.onFree, r.onFreeAfter], [1, 1]);
    },
    45_000,
  );

  test(
    "svm.release() while d1's gated command uses an allocation d0 used too: freed after that command, no crash, no leak",
    async () => {
      const r = await child("svm-release");
      assert.equal(r.aliveAfterRelease, false);
      assert.equal(r.liveWhileUsed, true);
      assert.equal(r.e1, 0);
    },
    45_000,
  );

  test(
    "the context released first: it makes nothing more, its queues on both devices, buffers and kernels keep working; d0's queue released with d1's command waiting on it",
    async () => {
      const r = await child("release-order");
      assert.equal(r.contextAlive, false);
      assert.deepEqual(
        [r.makeAfterRelease, r.queueAfterRelease, r.userEventAfterRelease, r.q0Used],
        ["ReleasedError", "ReleasedError", "ReleasedError", "ReleasedError"],
      );
      assert.deepEqual(r.data, [12]);
      assert.equal(r.destructors, 1);
    },
    45_000,
  );

  test(
    "d0's queue released while its command is gated and d1's waits on it: both run when the gate opens; the buffer's destructor once, after",
    async () => {
      const r = await child("queue-release-running");
      assert.equal(r.destructorsBeforeGate, 0);
      assert.deepEqual(r.e, [0, 0]);
      assert.equal(r.destructors, 1);
    },
    45_000,
  );
});

describe(`two drivers in one context (POCL_DEVICES="${MIXED}", child processes)`, () => {
  test(
    "devices, a build for one device then both, kernels on each queue in turn, a hostPtr 'use' destructor, SVM frees with onFree on each queue",
    async () => {
      const r = await child("basic-subset", MIXED);
      assert.equal(r.devices, true);
      assert.deepEqual(r.statusOne, [-1, 0]);
      assert.equal(r.enqueueOnUnbuilt, "OpenCLError clEnqueueNDRangeKernel CL_INVALID_PROGRAM_EXECUTABLE");
      assert.deepEqual(r.status, [0, 0]);
      assert.deepEqual(r.data, [12]);
      assert.equal(r.destructors, 1);
      assert.deepEqual(r.host, [12]);
      if (r.onFree !== undefined) assert.deepEqual(r.onFree, [0, 1]);
    },
    45_000,
  );

  test(
    "a basic-device command waiting for an event not yet complete (a user event, another device's command) is refused before the native call: PoCL's basic driver deadlocked when it completed (the JS thread for ever in setStatus); completed events are taken",
    async () => {
      const r = await child("basic-gated", MIXED, 15_000);
      const refused = "OpenCLError clEnqueueNDRangeKernel CL_INVALID_OPERATION";
      assert.deepEqual([r.gatedOnBasic, r.afterOtherDevice], [refused, refused]);
      assert.equal(r.readAfterOther, "OpenCLError clEnqueueReadBuffer CL_INVALID_OPERATION");
      assert.deepEqual(r.data, [12], "d1's 1 then d0's 2, once both were complete");
      assert.deepEqual(r.dataAfter, [1222], "d0's command, then d1's waiting for it");
    },
    20_000,
  );

  test("the same device list and build status as PyOpenCL", async () => {
    const py = pyopencl(MIXED);
    if (typeof py === "string") skip(py);
    const r = await child("context", MIXED);
    assert.deepEqual([r.names, r.devices, r.duplicate], [py.names, py.devices, py.duplicate]);
    const b = await child("basic-subset", MIXED);
    assert.deepEqual(b.status, py.status);
  }, 90_000);
});
