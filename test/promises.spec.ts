// README promises that no other spec held to (the ordered gap list of the promises audit):
// Embree scenes released or used during their own commit, releases racing a commit with a JS
// monitor, the budget against a monitor that says yes, SVM mappings freed while mapped, host
// memory and hostPtr "use" memory of commands pending behind a user event under forced GC, and
// device selection by environment. Everything that could crash or hang runs in a child process
// (test/fixtures/promises-embree.ts, test/fixtures/promises-opencl.ts) with a time limit.
import { describe, test } from "vitest";
import { assert, runScript, skip } from "./helpers.ts";

const embreeFixture = new URL("./fixtures/promises-embree.ts", import.meta.url);
const openclFixture = new URL("./fixtures/promises-opencl.ts", import.meta.url);

async function child(
  fixture: URL,
  args: string[],
  env: Record<string, string> = {},
  timeout = 90_000,
): Promise<Record<string, unknown>> {
  const what = args.join(" ");
  const r = await runScript(fixture, args, { env, timeout });
  assert.equal(r.timedOut, false, `${what}: the child hung (killed after ${timeout} ms); stderr: ${r.stderr}`);
  assert.equal(r.signal, null, `${what}: killed by ${r.signal}; stderr: ${r.stderr}`);
  assert.equal(r.code, 0, `${what}: exit code ${r.code}; stderr: ${r.stderr}`);
  const line = r.stdout.trim().split("\n").pop() ?? "";
  return JSON.parse(line) as Record<string, unknown>;
}

describe("Embree: a scene released or used during its own commit", () => {
  for (const option of ["none", "monitor"]) {
    test(`released right after commit() and in a later turn, 200k triangles, ${option === "monitor" ? "with" : "without"} a JS monitor: the commit settles, the scene is freed, bytes back to 0`, async () => {
      const report = await child(embreeFixture, ["release-during-commit", option]);
      assert.deepEqual(report.outcomes, ["ok"]);
      assert.equal(report.bytes, 0);
      for (let i = 0; i < 8; i++) {
        assert.equal(report[`bytes${i}`], 0, `round ${i}: the scene was not freed when its commit settled`);
      }
      if (option === "monitor") assert.equal(report.monitorCalls, true);
      assert.deepEqual(report.reported, []);
    });
  }

  test("addTriangleMesh and intersect1 during the commit throw RTC_ERROR_INVALID_OPERATION; afterwards both work and the hit is right", async () => {
    const report = await child(embreeFixture, ["busy-during-commit"]);
    assert.ok((report.during as number) >= 2, "nothing was tried during the commit");
    assert.deepEqual(
      (report.duringKinds as string[]).map((s) => JSON.parse(s)).sort((a, b) => a.fn.localeCompare(b.fn)),
      [
        { kind: "EmbreeError", fn: "rtcAttachGeometry", codeName: "RTC_ERROR_INVALID_OPERATION", cause: "undefined" },
        { kind: "EmbreeError", fn: "rtcIntersect1", codeName: "RTC_ERROR_INVALID_OPERATION", cause: "undefined" },
      ],
    );
    assert.equal(report.committed, true);
    // The refused adds changed nothing: the next geometry ID is 2, after the two added before.
    assert.deepEqual(report.hit, { geomID: 0, primID: 0, distance: 6 });
    assert.equal(report.addAfter, 2);
  });
});

describe("Embree: releases while a commit with a JS monitor runs", () => {
  for (const option of ["scene", "device", "both", "inside-scene", "inside-device", "inside-both"]) {
    const what = option.replace("inside-", "");
    const where = option.startsWith("inside-") ? "inside the monitor" : "from a timer";
    test(`the ${what === "both" ? "scene and the device" : what} released ${where} mid-commit: no deadlock, the commit settles, bytes back to 0`, async () => {
      const report = await child(embreeFixture, ["release-from-timer", option]);
      assert.deepEqual(report.outcomes, ["ok"]);
      assert.deepEqual(report.bytes, [0]);
      assert.deepEqual(report.reported, []);
    });
  }
});

describe("Embree: the budget against the monitor", () => {
  for (const option of ["yes", "nothing"]) {
    test(`the budget refuses though the monitor answers ${option === "yes" ? "true" : "nothing"}; the monitor saw the call; the cause is the budget's RangeError`, async () => {
      const report = await child(embreeFixture, ["budget", option]);
      assert.equal(report.kind, "EmbreeError");
      assert.equal(report.fn, "rtcCommitScene");
      assert.equal(report.codeName, "RTC_ERROR_OUT_OF_MEMORY");
      assert.equal(report.causeIsRangeError, true, String(report.cause));
      assert.equal(report.monitorSawRefusedCall, true);
      assert.ok((report.denied as number) >= 1);
      assert.equal(report.bytes, 0);
      assert.deepEqual(report.reported, []);
    });
  }

  test("the budget refuses and the monitor threw for the same call: the cause is the monitor's exception, delivered once", async () => {
    const report = await child(embreeFixture, ["budget", "throws"]);
    assert.equal(report.codeName, "RTC_ERROR_OUT_OF_MEMORY");
    assert.equal(report.causeIsThrown, true, String(report.cause));
    assert.ok((report.denied as number) >= 1);
    assert.equal(report.bytes, 0);
    assert.deepEqual(report.reported, []);
  });
});

describe("OpenCL: SVM allocations freed while mapped", () => {
  test("release() while mapped: the mapped memory stays the program's until the unmap completed, then the allocation is gone", async () => {
    const report = await child(openclFixture, ["map-release"]);
    if (report.skip) skip(String(report.skip));
    assert.equal(report.liveObjects, 0);
    assert.deepEqual((report.results as string[]).map((s) => JSON.parse(s)), [{
      ok: true,
      refusal: "",
      onFreeRan: false,
      usable: false,
      freedAfterUnmap: false,
    }]);
  });

  for (const mode of ["map-svmfree", "map-svmfree-onfree"]) {
    test(`enqueueSVMFree${mode.endsWith("onfree") ? " with onFree" : ""} while mapped is refused with CL_INVALID_OPERATION before the native call: the mapping keeps working, nothing crashes`, async () => {
      const report = await child(openclFixture, [mode]);
      if (report.skip) skip(String(report.skip));
      assert.equal(report.liveObjects, 0);
      assert.deepEqual((report.results as string[]).map((s) => JSON.parse(s)), [
        {
          ok: true,
          refusal: "clEnqueueSVMFree:CL_INVALID_OPERATION",
          onFreeRan: false,
          usable: true,
          freedAfterUnmap: true,
        },
      ]);
    });
  }
});

describe("OpenCL: memory of commands pending behind a user event, under forced GC", () => {
  test("a write source, a read target and SVM memcpy host views dropped right after enqueueing: the data is right once the gate opens", async () => {
    const report = await child(openclFixture, ["host-memory"]);
    assert.deepEqual(report.results, ["ok"]);
    assert.equal(report.liveObjects, 0);
  });

  test('a hostPtr "use" buffer released and dropped with a command pending: its memory holds the data, the destructor fires after the gate opened', async () => {
    const report = await child(openclFixture, ["use-pin"]);
    assert.deepEqual(report.results, ["ok"]);
    assert.equal(report.liveObjects, 0);
  });
});

describe("OpenCL: device selection by environment", () => {
  test("MEMLIFE_OPENCL_PLATFORM / MEMLIFE_OPENCL_DEVICE by index and case-insensitive substring; a selector matching nothing is a RangeError listing what there is", async () => {
    // Empty reads as unset: the GPU machine's PoCL pass sets MEMLIFE_OPENCL_PLATFORM for every test.
    const plain = await child(
      openclFixture,
      ["select"],
      { MEMLIFE_OPENCL_PLATFORM: "", MEMLIFE_OPENCL_DEVICE: "" },
      30_000,
    );
    const all = plain.all as { platform: string; devices: string[] }[];
    const first = all.find((p) => p.devices.length > 0)!;
    assert.equal(plain.device, first.devices[0], "no variable: the first device of the first platform with one");
    const last = all.filter((p) => p.devices.length > 0).at(-1)!;
    const platformIndex = all.indexOf(last);
    const lastDevice = last.devices.at(-1)!;
    const byIndex = await child(openclFixture, ["select"], {
      MEMLIFE_OPENCL_PLATFORM: String(platformIndex),
      MEMLIFE_OPENCL_DEVICE: String(last.devices.length - 1),
    });
    assert.equal(byIndex.platform, last.platform);
    assert.equal(byIndex.device, lastDevice);
    assert.equal(byIndex.context, lastDevice, "createContext() uses the selected device");
    // A substring in another case than the name's.
    const sub = (s: string) => s.slice(1, Math.min(s.length, 8)).toUpperCase();
    const bySubstring = await child(openclFixture, ["select"], {
      MEMLIFE_OPENCL_PLATFORM: sub(last.platform).toLowerCase(),
      MEMLIFE_OPENCL_DEVICE: sub(lastDevice),
    });
    assert.equal(bySubstring.platform, last.platform);
    assert.equal(bySubstring.device, last.devices.find((d) => d.toLowerCase().includes(sub(lastDevice).toLowerCase())));
    const unmatched: Record<string, string>[] = [
      { MEMLIFE_OPENCL_PLATFORM: "no such platform" },
      { MEMLIFE_OPENCL_DEVICE: "no such device" },
      { MEMLIFE_OPENCL_PLATFORM: "99" },
      { MEMLIFE_OPENCL_DEVICE: "99" },
    ];
    for (const env of unmatched) {
      const report = await child(openclFixture, ["select"], env);
      const error = String(report.error);
      assert.match(error, /^RangeError: /, JSON.stringify(env));
      const [value] = Object.values(env);
      assert.ok(error.includes(`"${value}"`), `the message names the selector: ${error}`);
      const listed = "MEMLIFE_OPENCL_PLATFORM" in env ? first.platform : first.devices[0];
      assert.ok(error.includes(listed), `the message lists what there is: ${error}`);
    }
  });
});
