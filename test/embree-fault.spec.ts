// An Embree that misbehaves (test/native/embree-fault.c, as EMBREE_LIBRARY): what it reports must
// not crash memlife, nor land on the wrong caller. Each case runs test/fixtures/embree-fault.ts in
// a child process. From a hostile pass (a fault-injecting Embree): each case failed before its fix.
import { afterAll, describe, test } from "vitest";
import { isAbsolute } from "node:path";
import { assert, buildShim, runScript, skip } from "./helpers.ts";
import { rtc } from "../src/mod.ts";

/** test/native/embree-fault.c built over the Embree memlife opens (its path, or the name the loader found), or why not. */
function build(): { path: string; cleanup(): void; major: number } | { skip: string } {
  let loaded: rtc.Version;
  try {
    loaded = rtc.load();
  } catch (error) {
    return { skip: `no Embree: ${error}` };
  }
  const shim = buildShim("embree-fault", isAbsolute(loaded.path) ? loaded.path : `-l:${loaded.path}`);
  return "skip" in shim ? shim : { ...shim, major: loaded.major };
}

const built = build();
afterAll(() => {
  if ("cleanup" in built) built.cleanup();
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
