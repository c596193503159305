// An Embree that misbehaves (test/native/embree-fault.c, as EMBREE_LIBRARY): what it reports must
// not crash memlife, nor land on the wrong caller. Each case runs test/fixtures/embree-fault.ts in
// a child process. From a hostile pass (a fault-injecting Embree): each case failed before its fix.
import { afterAll, describe, test } from "vitest";
import { spawnSync } from "node:child_process";
import { mkdtempSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, isAbsolute, join } from "node:path";
import { fileURLToPath } from "node:url";
import { assert, runScript, skip } from "./helpers.ts";
import { rtc } from "../src/mod.ts";

/** test/native/embree-fault.c built over the Embree memlife opens, or why it cannot be. */
function build(): { path: string; dir: string; major: number } | { skip: string } {
  let link: string[];
  let major: number;
  try {
    const loaded = rtc.load();
    major = loaded.major;
    // By its path and an RPATH that wins where EMBREE_LIBRARY names one (the GPU machine's Embree 4),
    // else by the name the loader found.
    link = isAbsolute(loaded.path)
      ? [realpathSync(loaded.path), `-Wl,--disable-new-dtags,-rpath,${dirname(realpathSync(loaded.path))}`]
      : [`-l:${loaded.path}`];
  } catch (error) {
    return { skip: `no Embree: ${error}` };
  }
  const dir = mkdtempSync(join(tmpdir(), "memlife-embree-fault-"));
  const path = join(dir, "libembree-fault.so");
  const source = fileURLToPath(new URL("./native/embree-fault.c", import.meta.url));
  const r = spawnSync("cc", [
    "-O2",
    "-fPIC",
    "-shared",
    "-pthread",
    "-o",
    path,
    source,
    "-Wl,--no-as-needed",
    ...link,
    "-ldl",
  ], { encoding: "utf8" });
  if (r.error !== undefined || r.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    return { skip: `cannot build test/native/embree-fault.c (${r.error?.message ?? r.stderr.trim()})` };
  }
  return { path, dir, major };
}

const built = build();
afterAll(() => {
  if ("dir" in built) rmSync(built.dir, { recursive: true, force: true });
});

async function misbehaving(name: string, env: Record<string, string>): Promise<Record<string, unknown>> {
  if ("skip" in built) skip(built.skip);
  const r = await runScript(new URL("./fixtures/embree-fault.ts", import.meta.url), [name], {
    timeout: 30_000,
    env: { EMBREE_LIBRARY: built.path, ...env },
  });
  const out = `${r.stdout}${r.stderr}`.trim().slice(-2000);
  assert.equal(r.timedOut, false, `hung:\n${out}`);
  assert.equal(r.signal, null, `killed by ${r.signal}:\n${out}`);
  assert.equal(r.code, 0, out);
  return JSON.parse(r.stdout.trim().split("\n").at(-1)!) as Record<string, unknown>;
}

describe("an Embree that misbehaves", () => {
  test(
    "a version property that disagrees with the library's symbols does not choose rtcIntersect1's arguments (SIGSEGV before)",
    async () => {
      if ("skip" in built) skip(built.skip);
      const other = built.major === 3 ? "40000" : "31305";
      for (const value of [other, "7", "-1"]) {
        const r = await misbehaving("version", { MEMLIFE_EMBREE_VERSION: value });
        assert.equal(r.hit, 0, `version property ${value}: ${JSON.stringify(r)}`);
        assert.equal((r.version as { major: number }).major, built.major, JSON.stringify(r));
      }
    },
    60_000,
  );

  test(
    "an error a deferred scene release reports goes to onCallbackError, not to the commit that succeeded",
    async () => {
      const r = await misbehaving("release-error", { MEMLIFE_EMBREE_RELEASE_ERROR: "1" });
      assert.equal(r.commit, "resolved");
      assert.deepEqual(r.reported, ["release: rtcReleaseScene"]);
    },
    40_000,
  );

  test("rtcNewDevice returning NULL without an error code is RTC_ERROR_UNKNOWN, not RTC_ERROR_NONE", async () => {
    const r = await misbehaving("null-device", { MEMLIFE_EMBREE_NULL_DEVICE: "1" });
    assert.equal(r.error, "rtcNewDevice RTC_ERROR_UNKNOWN");
  }, 40_000);
});
