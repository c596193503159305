/**
 * Differential test against the C APIs: test/differential/probe.c makes a fixed script of OpenCL
 * and Embree calls straight through C, test/differential/probe.ts makes the same calls through
 * memlife on this runtime, and each test below compares a group of their observations one by one.
 *
 * Where memlife differs on purpose, `intended` says what memlife must give instead and why; the
 * `equivalent` rules map the few C results memlife reports in another form. Nothing else may
 * differ. Tests named "known:" cover mismatches other branches are fixing (input checks): they
 * compare strictly and fail until those fixes land.
 *
 * Needs a C compiler and the OpenCL and Embree headers (Debian: gcc libc6-dev ocl-icd-opencl-dev
 * libembree-dev); without them every test skips, saying which is missing.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll as after, describe, test } from "vitest";
import { assert, runScript, runtime, skip } from "./helpers.ts";

type Observations = Map<string, unknown>;

const probeC = fileURLToPath(new URL("./differential/probe.c", import.meta.url));
const probeTs = new URL("./differential/probe.ts", import.meta.url);
const workDir = mkdtempSync(join(tmpdir(), "memlife-differential-"));
after(() => rmSync(workDir, { recursive: true, force: true }));

/** {"k","v"} lines into a map; a key printed twice is a probe bug. */
function parse(text: string, who: string): Observations {
  const out: Observations = new Map();
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    const { k, v } = JSON.parse(line) as { k: string; v: unknown };
    if (out.has(k)) throw new Error(`${who} printed ${k} twice`);
    out.set(k, v);
  }
  return out;
}

/** A library memlife opened, as linker arguments: the same file, not whatever `-lOpenCL` finds. */
function linkArguments(path: string): string[] {
  return path.includes("/") ? [path, `-Wl,-rpath,${dirname(path)}`] : [`-l:${path}`];
}

function cc(args: string[], input?: string): { ok: boolean; output: string } {
  const r = spawnSync("cc", args, { input, encoding: "utf8" });
  if (r.error !== undefined) return { ok: false, output: String(r.error) };
  return { ok: r.status === 0, output: `${r.stdout}${r.stderr}` };
}

const firstLines = (text: string) => text.trim().split("\n").slice(0, 3).join(" | ");

/** Both probes' observations, or why the C side cannot run here (then every test skips). */
async function runProbes(): Promise<{ c: Observations; m: Observations } | { skip: string }> {
  const m = await runScript(probeTs, [], { timeout: 60_000 });
  if (m.code !== 0 || m.timedOut) {
    throw new Error(
      `the memlife probe failed (code ${m.code}, signal ${m.signal}, timed out: ${m.timedOut}):\n${m.stderr}`,
    );
  }
  const memlife = parse(m.stdout, "probe.ts");
  const opencl = memlife.get("meta.opencl") as string;
  const embree = memlife.get("meta.embree") as { major: number; path: string };

  const version = cc(["--version"]);
  if (!version.ok) {
    return { skip: `no C compiler: \`cc --version\` failed (${firstLines(version.output)}); install gcc libc6-dev` };
  }
  const header = `embree${embree.major}/rtcore.h`;
  const headers = cc(["-E", "-x", "c", "-o", "/dev/null", "-"], `#include <CL/cl.h>\n#include <${header}>\n`);
  if (!headers.ok) {
    return {
      skip: `no OpenCL/Embree C headers (CL/cl.h, ${header}): ${
        firstLines(headers.output)
      }; install ocl-icd-opencl-dev libembree-dev`,
    };
  }
  const binary = join(workDir, "probe");
  const build = cc([
    "-O1",
    `-DEMBREE_MAJOR=${embree.major}`,
    "-o",
    binary,
    probeC,
    // A driver shim as OPENCL_LIBRARY (test/native/) defines a few functions and leaves the rest to
    // the library it links: the linker may take those from there.
    "-Wl,--copy-dt-needed-entries",
    ...linkArguments(opencl),
    ...linkArguments(embree.path),
  ]);
  if (!build.ok) throw new Error(`cc could not build test/differential/probe.c:\n${build.output}`);
  const c = spawnSync(binary, { encoding: "utf8", timeout: 60_000 });
  if (c.status !== 0) throw new Error(`the C probe failed (status ${c.status}, signal ${c.signal}):\n${c.stderr}`);
  return { c: parse(c.stdout, "probe.c"), m: memlife };
}

let probes: ReturnType<typeof runProbes> | undefined;
async function observations(): Promise<{ c: Observations; m: Observations }> {
  const result = await (probes ??= runProbes());
  if ("skip" in result) skip(result.skip);
  return result;
}

const throws = (name: string) => ({ throws: name });
const checkedFirst = "memlife checks its arguments before any native call (design: bad input never reaches C)";
const wraps = "the value does not fit the C parameter's type: C truncates it, memlife must refuse it (design §8)";

/** Where memlife differs from C on purpose: what it gives instead, and why. */
const intended: Record<string, { memlife: unknown; why: string }> = {
  "cl.getDeviceIDs.0": { memlife: throws("RangeError"), why: `0 is no device type; ${checkedFirst}` },
  "cl.createBuffer.size0": { memlife: throws("RangeError"), why: checkedFirst },
  "cl.createBuffer.useHostPtrWithoutData": {
    memlife: throws("TypeError"),
    why: `hostPtr "use" without data; ${checkedFirst}`,
  },
  "cl.createBuffer.readOnlyAndWriteOnly": {
    memlife: throws("TypeError"),
    why: `\`access\` takes one of three names; ${checkedFirst}`,
  },
  "cl.createBuffer.invalidContext": {
    memlife: throws("ReleasedError"),
    why: "memlife never passes a released handle to C",
  },
  "cl.setDestructorCallback.null": { memlife: throws("TypeError"), why: checkedFirst },
  "cl.write.outOfBounds": { memlife: throws("RangeError"), why: checkedFirst },
  "cl.write.waitListNull": { memlife: throws("TypeError"), why: `waitFor holds a non-event; ${checkedFirst}` },
  "cl.userEvent.setStatus(1)": { memlife: throws("RangeError"), why: checkedFirst },
  "cl.userEvent.setStatus(2)": { memlife: throws("RangeError"), why: checkedFirst },
  "cl.userEvent.setStatus(-2^32)": { memlife: throws("RangeError"), why: wraps },
  // Nothing reached C: the user event is still CL_SUBMITTED, where C's truncated 0 completed it.
  "cl.userEvent.setStatus(-2^32).status": { memlife: 2, why: wraps },
  "cl.svmAlloc.align3": { memlife: throws("RangeError"), why: checkedFirst },
  "cl.svmAlloc.size0": { memlife: throws("RangeError"), why: checkedFirst },
  "cl.svmAlloc.overMaxAlloc": {
    memlife: throws("RangeError"),
    why: `over CL_DEVICE_MAX_MEM_ALLOC_SIZE; ${checkedFirst}`,
  },
  "cl.svmAlloc.atomicsWithoutFineGrain": { memlife: throws("TypeError"), why: checkedFirst },
  "cl.svmAlloc.align2^32": { memlife: throws("RangeError"), why: wraps },
  "rtc.getProperty(-1)": { memlife: throws("RangeError"), why: checkedFirst },
  "rtc.getProperty(2^32+1)": { memlife: throws("RangeError"), why: wraps },
  "rtc.scenes.modified.ray": {
    memlife: { code: 3, fn: "rtcIntersect1" },
    why: "a mesh was added since the commit: Embree's release build answers from the last commit's BVH " +
      "(without the new mesh) and reports nothing; memlife refuses as Embree does for a scene never committed " +
      "(scene.committed is false until commit() again)",
  },
};

/**
 * C results memlife reports in another form, each rule with its reason; applied to C's side
 * before comparing. `null` means the rule does not apply.
 */
const equivalent: { why: string; map: (key: string, c: unknown) => unknown }[] = [
  {
    why: "getDevices(type) returns [] where clGetDeviceIDs reports CL_DEVICE_NOT_FOUND",
    map: (key, c) => key.startsWith("cl.getDeviceIDs.") && isCode(c, -1, "clGetDeviceIDs") ? { devices: [] } : null,
  },
  {
    why: "clSVMAlloc returns NULL with no code: memlife throws an OpenCLError naming it (its code is memlife's choice)",
    map: (_key, c) =>
      isObject(c) && c.null === true && c.fn === "clSVMAlloc" ? { code: "(any)", fn: "clSVMAlloc" } : null,
  },
];

/**
 * Values the driver computes afresh in each process, so that the two probes can differ: accepted
 * within a factor of 2, which still catches a wrong width or unit.
 */
const varies: Record<string, string> = {
  "cl.device.globalMemSize": "PoCL derives it from the memory free when the process asks",
  "cl.device.maxMemAllocSize": "PoCL derives it from the global memory size",
};

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
function isCode(v: unknown, code: number, fn: string): boolean {
  return isObject(v) && v.code === code && v.fn === fn;
}

/** memlife's side in the comparable form: an exception's message and clSVMAlloc's invented code are left out. */
function canonicalMemlife(v: unknown): unknown {
  if (!isObject(v)) return v;
  if ("throws" in v) return { throws: v.throws };
  if (v.fn === "clSVMAlloc" && "code" in v) return { code: "(any)", fn: "clSVMAlloc" };
  return v;
}

const show = (v: unknown) => (v === undefined ? "(nothing printed)" : JSON.stringify(v));

/** Compares the observations whose keys `select` picks; fails with one paragraph per difference. */
async function compare(select: (key: string) => boolean): Promise<void> {
  const { c, m } = await observations();
  const keys = [...c.keys()].filter(select);
  assert.ok(keys.length > 0, "no C observation in this group: the probe changed");
  const differences: string[] = [];
  for (const key of keys) {
    // Through JSON as probe.ts's side went: it cannot carry -0 (Embree's normals have some).
    const cValue = JSON.parse(JSON.stringify(c.get(key)) ?? "null");
    let expected: unknown = cValue;
    let why = "";
    const rule = intended[key];
    if (rule !== undefined) {
      expected = rule.memlife;
      why = `intended difference: ${rule.why}`;
    } else {
      for (const e of equivalent) {
        const mapped = e.map(key, cValue);
        if (mapped !== null) {
          expected = mapped;
          why = `equivalent: ${e.why}`;
          break;
        }
      }
    }
    const actual = canonicalMemlife(m.get(key));
    if (key in varies && typeof actual === "number" && typeof expected === "number") {
      if (actual >= expected / 2 && actual <= expected * 2) continue;
      why = `varies between processes: ${varies[key]}; accepted within a factor of 2`;
    }
    try {
      assert.deepStrictEqual(actual, expected);
    } catch {
      differences.push(
        `  ${key}\n    C:        ${show(cValue)}\n    expected: ${show(expected)}${why ? `  (${why})` : ""}\n` +
          `    memlife:  ${show(m.get(key))}`,
      );
    }
  }
  if (differences.length > 0) {
    assert.fail(
      `${differences.length} of ${keys.length} observations differ from C on ${runtime}:\n${differences.join("\n")}`,
    );
  }
}

/** Every test's selection, to check that each observation belongs to exactly one test. */
const groups: ((key: string) => boolean)[] = [];
function group(name: string, select: (key: string) => boolean): void {
  groups.push(select);
  test(name, () => compare(select), 90_000);
}

const known = {
  defaultType: (k: string) => k === "cl.getDeviceIDs.DEFAULT",
  zeroLength: (k: string) => /^cl\.(read|write)\.size0/.test(k),
  statusWrap: (k: string) => k.startsWith("cl.userEvent.setStatus(-2^32)"),
  alignmentWrap: (k: string) => k === "cl.svmAlloc.align2^32",
  propertyWrap: (k: string) => k === "rtc.getProperty(2^32+1)",
};
const isRay = (k: string) => /^rtc\.\w+\.ray\./.test(k);
const isKnown = (k: string) => Object.values(known).some((select) => select(k));

describe("constants and error names, as the C headers define them", () => {
  group(
    "OpenCLError.codeName of each status code of CL/cl.h and CL/cl_ext.h",
    (k) => k.startsWith("const.cl.codeName("),
  );
  group("cl.DeviceType, MemFlags, CommandType, ExecutionStatus", (k) => /^const\.cl\.[A-Z]/.test(k));
  group("rtc.DeviceProperty and EmbreeError.codeName", (k) => k.startsWith("const.rtc."));
});

describe("OpenCL, as C sees it", () => {
  group("platform and device info", (k) => /^cl\.(platforms|platform|device)\./.test(k));
  group("clGetDeviceIDs for each device type", (k) => k.startsWith("cl.getDeviceIDs.") && !isKnown(k));
  group("known: getDevices(DeviceType.DEFAULT) finds the default device", known.defaultType);
  group(
    "clCreateBuffer errors; buffer, context and queue info",
    (k) => /^cl\.(createBuffer|buffer|context|queue|setDestructorCallback)\./.test(k),
  );
  group("three destructor callbacks run in C's order", (k) => k === "cl.destructorOrder");
  group("destructor callbacks of a buffer an enqueued command still uses", (k) => k.startsWith("cl.destructor."));
  group("reads and writes: errors, command types, statuses", (k) => /^cl\.(read|write)\./.test(k) && !isKnown(k));
  group("known: zero-length reads and writes", known.zeroLength);
  group("user events: statuses, errors, a failed wait list", (k) => k.startsWith("cl.userEvent.") && !isKnown(k));
  group("known: setStatus(-(2 ** 32)) is refused, not truncated", known.statusWrap);
  group("clSVMAlloc: flags, alignments, sizes", (k) => k.startsWith("cl.svmAlloc.") && !isKnown(k));
  group("known: svmAlloc alignment 2 ** 32 is refused, not truncated", known.alignmentWrap);
  group("clEnqueueSVMFree: callback arguments in order, empty list, event", (k) => k.startsWith("cl.svmFree."));
  group(
    "programs: source, build status and log, kernel names, failed builds",
    (k) => k.startsWith("cl.program."),
  );
  group("kernels: names, argument info, work-group info", (k) => k.startsWith("cl.kernel."));
  group("by-value kernel arguments: the bytes each kernel stored", (k) => k.startsWith("cl.values."));
  group("a write and a marker behind a user event: statuses before and after", (k) => k.startsWith("cl.gated."));
  group("clEnqueueNDRangeKernel: errors, offsets, command types, results", (k) => k.startsWith("cl.ndrange."));
  group(
    "copies, fills, markers, barriers: errors, command types, results",
    (k) => /^cl\.(copy|fill|marker|barrier)\./.test(k),
  );
  group(
    "SVM fill, copy, map and unmap: command types, contents",
    (k) => /^cl\.svm(MemFill|Memcpy|Map|Unmap)\./.test(k),
  );
});

describe("Embree threads=1, as C sees it", () => {
  group("rtcNewDevice configurations", (k) => k.startsWith("rtc.newDevice("));
  group("rtcGetDeviceProperty values and errors", (k) => k.startsWith("rtc.getProperty(") && !isKnown(k));
  group("known: getProperty(2 ** 32 + 1) is refused, not truncated", known.propertyWrap);
  group(
    "monitor calls of device, scene, mesh, commit, releases; device.memory",
    (k) => k.startsWith("rtc.run.") && !isRay(k),
  );
  group(
    "intersect1: hits, misses, barycentrics, normals, tnear, tfar, time and mask as rtcIntersect1 gives them",
    isRay,
  );
  group("two meshes in a scene, an empty scene", (k) => k.startsWith("rtc.scenes.") && !isRay(k));
  group("setMemoryBudget: the mesh, the commit, device.memory", (k) => k.startsWith("rtc.budget("));
  group("monitor refusing addTriangleMesh's first allocation", (k) => k.startsWith("rtc.refuseMesh."));
  group("monitor refusing the commit's first allocation", (k) => k.startsWith("rtc.refuseCommit."));
  group("monitor calls of a scene released after its device", (k) => k.startsWith("rtc.deviceFirst.") && !isRay(k));
  group("monitor calls of a retained scene's two releases", (k) => k.startsWith("rtc.sceneRetained.") && !isRay(k));
});

test("every observation is compared by exactly one test, and both probes made the same ones", async () => {
  const { c, m } = await observations();
  const uncovered = [...c.keys()].filter((k) => groups.filter((select) => select(k)).length !== 1);
  assert.deepEqual(uncovered, [], "C observations in no test, or in several");
  // memlife names the codes of every Khronos header; these C headers may lack some (cl_dx9_media_sharing.h).
  const memlifeOnly = [...m.keys()].filter((k) =>
    !c.has(k) && !k.startsWith("meta.") && !k.startsWith("const.cl.codeName(")
  );
  const cOnly = [...c.keys()].filter((k) => !m.has(k));
  assert.deepEqual({ memlifeOnly, cOnly }, { memlifeOnly: [], cOnly: [] });
  for (const key of Object.keys(intended)) {
    assert.ok(c.has(key), `intended difference for ${key}, which C no longer observes`);
  }
}, 90_000);
