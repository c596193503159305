/**
 * A native release that fails after `release()` returned has no caller to receive the failure:
 * it reaches onCallbackError with source "release" for Embree as for OpenCL (robust-async.spec.ts),
 * not "memoryMonitor", which names exceptions of the user's monitor.
 */
import { describe, test } from "vitest";
import { assert } from "./helpers.ts";
import { onCallbackError, rtc } from "../src/mod.ts";
import { embree } from "../src/embree/native.ts";

describe("release failures", () => {
  test('a scene released off the JS thread while a commit runs reports a failed release with source "release"', async () => {
    using device = rtc.newDevice("threads=1");
    const busy = device.newScene();
    // Big enough that its commit is still running when the other scene is released.
    const n = 200_000;
    const vertices = new Float32Array(9 * n).map((_, i) => (i * 7919) % 1000 / 100);
    const indices = new Uint32Array(3 * n).map((_, i) => i);
    busy.addTriangleMesh(vertices, indices);
    const other = device.newScene();
    const async = embree().async as Record<string, unknown>;
    const original = async.rtcReleaseScene;
    const failure = new Error("no thread to run rtcReleaseScene on");
    const seen: [unknown, string][] = [];
    onCallbackError((error, source) => void seen.push([error, source]));
    try {
      async.rtcReleaseScene = () => Promise.reject(failure);
      const commit = busy.commit();
      // The commit starts on a later microtask (after the device's earlier commits).
      await new Promise((r) => setTimeout(r, 0));
      other.release();
      async.rtcReleaseScene = original;
      await commit;
      for (let i = 0; i < 100 && seen.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
      assert.deepEqual(seen, [[failure, "release"]]);
    } finally {
      async.rtcReleaseScene = original;
      onCallbackError(null);
      busy.release();
    }
  });
});
