/**
 * Promises README.md makes that no other spec would catch if they broke: each test quotes the
 * promise it holds memlife to. Every test makes its own context or device and releases it.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { afterAll, describe, test } from "vitest";
import { assert, random, randomMesh, runtime, runToEnd, skip, sleep, withTimeout } from "./helpers.ts";
import { cl, EmbreeError, onCallbackError, OpenCLError, ReleasedError, rtc } from "../src/mod.ts";
import { monitorDiagnostics } from "../src/embree/diagnostics.ts";
import { liveStates } from "../src/embree/state.ts";

// Whatever a test left behind, the next spec file's process starts clean; this is for the tests here.
afterAll(() => onCallbackError(null));

const fixture = (name: string) => new URL(`./fixtures/${name}`, import.meta.url);

/** One triangle. */
const tri = () => [new Float32Array([0, 0, 0, 1, 0, 0, 0, 1, 0]), new Uint32Array([0, 1, 2])] as const;

/** `triangles` small triangles in a 100-unit cube, the same on every run. */
const mesh = (triangles: number) => randomMesh(random(12345), triangles);

/** Polls `condition` every 5 ms until it holds; fails after `ms`. */
async function until(condition: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms`);
    await sleep(5);
  }
}

/** A child fixture's one JSON line, after checking that it ran to its end. */
async function childReport(
  name: string,
  env: Record<string, string> = {},
  args: string[] = [],
): Promise<Record<string, unknown>> {
  return JSON.parse(await runToEnd(fixture(name), args, { env, timeout: 30_000 })) as Record<string, unknown>;
}

function needSVM(ctx: cl.Context, fineGrain = false): void {
  const device = ctx.devices[0];
  if (!device.svm.coarseGrainBuffer) {
    ctx.release();
    skip(`device "${device.name}" has no SVM (CL_DEVICE_SVM_CAPABILITIES = 0)`);
  }
  if (fineGrain && !device.svm.fineGrainBuffer) {
    ctx.release();
    skip(`device "${device.name}" has no fine-grain SVM buffers`);
  }
}

// --- OpenCL ---------------------------------------------------------------------------------------

describe("README, OpenCL", () => {
  test('"A promise asked for after that resolves" (buf.destroyed), and onCallbackError gets source "destructor"', async () => {
    const ctx = cl.createContext();
    const seen: [string, string][] = [];
    onCallbackError((e, source) => void seen.push([String(e), source]));
    try {
      const b = ctx.createBuffer(64);
      b.setDestructorCallback(() => {
        throw new Error("boom");
      });
      // `destroyed` is not read before the callbacks ran: the exception goes to onCallbackError.
      b.release();
      await until(() => seen.length > 0, 5_000, "onCallbackError was not called");
      await withTimeout(b.destroyed, 2_000, "destroyed asked for after the callbacks ran");
      assert.deepEqual(seen, [["Error: boom", "destructor"]]);
    } finally {
      onCallbackError(null);
      ctx.release();
    }
  });

  test('"liveObjects (children not yet released natively, for leak checks)"', async () => {
    const ctx = cl.createContext();
    try {
      assert.equal(ctx.liveObjects, 0);
      const buf = ctx.createBuffer(64);
      const queue = ctx.createCommandQueue();
      const event = ctx.createUserEvent();
      assert.equal(ctx.liveObjects, 3, "a buffer, a queue and a user event");
      buf.release();
      event.setStatus(cl.ExecutionStatus.COMPLETE);
      event.release();
      assert.equal(ctx.liveObjects, 1, "the queue is left");
      queue.release();
      // A queue's native release may run off the JS thread.
      await until(() => ctx.liveObjects === 0, 5_000, "the queue's native release");
    } finally {
      ctx.release();
    }
  });

  test('"A WebAssembly.Memory that grows detaches its old ArrayBuffer too: a hostPtr: "use" buffer over it is then refused"', async () => {
    const ctx = cl.createContext();
    const queue = ctx.createCommandQueue();
    try {
      const mem = new WebAssembly.Memory({ initial: 1, maximum: 4 });
      const buf = ctx.createBuffer(new Uint8Array(mem.buffer, 0, 4096), { hostPtr: "use" });
      const gone = buf.destroyed;
      // Before the growth the buffer works (the refusals below are the growth's doing).
      await queue.writeBuffer(buf, new Uint8Array(16).fill(7));
      // Read back through OpenCL: a GPU (NVIDIA) caches a USE_HOST_PTR buffer, and the host memory
      // holds its contents only once mapped, as the OpenCL spec allows.
      assert.equal((await queue.readBuffer(buf, new Uint8Array(16)))[15], 7);
      mem.grow(1);
      assert.throws(() => queue.enqueueWriteBuffer(buf, new Uint8Array(16)), TypeError);
      assert.throws(() => queue.enqueueReadBuffer(buf, new Uint8Array(16)), TypeError);
      assert.throws(() => queue.enqueueFillBuffer(buf, new Uint8Array([1])), TypeError);
      buf.release();
      await withTimeout(gone, 5_000, "destroyed of the buffer over the grown memory");
      await queue.finish();
    } finally {
      queue.release();
      ctx.release();
    }
  });

  test('"clSVMAlloc reports no code: its NULL becomes CL_MEM_OBJECT_ALLOCATION_FAILURE with a sentence saying so"', () => {
    const ctx = cl.createContext();
    try {
      needSVM(ctx);
      let alloc: cl.SVMAllocation | undefined;
      let error: unknown;
      try {
        alloc = ctx.svmAlloc(64, { alignment: 2 ** 31 });
      } catch (e) {
        error = e;
      }
      if (alloc) {
        alloc.release();
        skip("the driver allocated 64 bytes aligned to 2 GiB: clSVMAlloc returned no NULL to test");
      }
      assert.ok(error instanceof OpenCLError, String(error));
      assert.equal(error.fn, "clSVMAlloc");
      assert.equal(error.codeName, "CL_MEM_OBJECT_ALLOCATION_FAILURE");
      assert.match(error.message, /NULL/);
    } finally {
      ctx.release();
    }
  });

  test('"enqueueSVMFree refuses an allocation ... whose memory is a hostPtr: "use" buffer\'s (CL_INVALID_OPERATION, before the native call)"', async () => {
    const ctx = cl.createContext();
    needSVM(ctx, true);
    const queue = ctx.createCommandQueue();
    try {
      const svm = ctx.svmAlloc(4096, { fineGrain: true });
      const buf = ctx.createBuffer(new Uint8Array(svm.arrayBuffer), { hostPtr: "use" });
      assert.throws(
        () => queue.enqueueSVMFree([svm]),
        (e: unknown) =>
          e instanceof OpenCLError && e.codeName === "CL_INVALID_OPERATION" && e.fn === "clEnqueueSVMFree",
      );
      assert.equal(svm.alive, true, "the refused free took nothing");
      buf.release();
      await withTimeout(buf.destroyed, 5_000, "destroyed");
      // "release that buffer, first": then the free goes through.
      let freed = 0;
      const event = queue.enqueueSVMFree([svm], { onFree: (_q, list) => void (freed = list.length) });
      await withTimeout(event.wait(), 5_000, "the SVM free");
      event.release();
      assert.equal(freed, 1);
      assert.equal(svm.alive, false);
    } finally {
      queue.release();
      ctx.release();
    }
  });

  test("\"an async onFree's promise is waited for by ... the queue's release, not by finish()\"", async () => {
    const ctx = cl.createContext();
    needSVM(ctx);
    const q = ctx.createCommandQueue();
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    let called = false;
    let settled = false;
    const ev = q.enqueueSVMFree([ctx.svmAlloc(64)], {
      onFree: async () => {
        called = true;
        await gate; // opened by the test below, not by a timer: the order is forced
        settled = true;
      },
    });
    try {
      await withTimeout(q.finish(), 5_000, "finish()");
      assert.equal(called, true, "finish() resolves once every onFree was called");
      assert.equal(settled, false, "finish() does not wait for the async onFree's promise");
      q.release();
      ev.release();
      // However long we wait, the native queue stays until the onFree's promise settled.
      await sleep(150);
      assert.equal(settled, false);
      assert.equal(ctx.liveObjects, 1, "the queue's native release waits for the onFree's promise");
      open();
      await until(() => ctx.liveObjects === 0, 5_000, "the queue's native release after onFree settled");
      assert.equal(settled, true);
    } finally {
      open();
      q.release();
      ev.release();
      ctx.release();
    }
  });

  test('"Options ... undefined means none"', async () => {
    const ctx = cl.createContext();
    const queue = ctx.createCommandQueue(undefined);
    try {
      assert.equal(queue.device, ctx.devices[0], "createCommandQueue(undefined): the context's first device");
      const b = ctx.createBuffer(16, undefined);
      assert.equal(b.size, 16);
      const data = Uint8Array.from({ length: 16 }, (_, i) => i + 1);
      await queue.writeBuffer(b, data, undefined);
      assert.deepEqual(await queue.readBuffer(b, new Uint8Array(16), undefined), data);
      b.release();
      if (ctx.devices[0].svm.coarseGrainBuffer) {
        const a = ctx.svmAlloc(64, undefined);
        assert.equal(a.size, 64);
        const event = queue.enqueueSVMFree([a], undefined);
        await withTimeout(event.wait(), 5_000, "the SVM free");
        event.release();
        assert.equal(a.alive, false);
      }
      // Not "anything goes": a misspelt key is still refused.
      assert.throws(() => ctx.createBuffer(16, { acess: "read_only" } as never), TypeError);
    } finally {
      queue.release();
      ctx.release();
    }
  });

  test('onCallbackError source "svmFree": an onFree that throws', async () => {
    const ctx = cl.createContext();
    needSVM(ctx);
    const queue = ctx.createCommandQueue();
    const sources: string[] = [];
    const errors: string[] = [];
    onCallbackError((e, source) => {
      sources.push(source);
      errors.push(String(e));
    });
    try {
      queue.enqueueSVMFree([ctx.svmAlloc(64)], {
        onFree() {
          throw new Error("x");
        },
      }).release();
      await withTimeout(queue.finish(), 5_000, "finish()");
      assert.deepEqual(sources, ["svmFree"]);
      assert.deepEqual(errors, ["Error: x"]);
    } finally {
      onCallbackError(null);
      queue.release();
      ctx.release();
    }
  });

  test('"the allocations onFree gets ... (alive is false, arrayBuffer throws ReleasedError), and their memory stays valid until onFree returned"', async () => {
    const ctx = cl.createContext();
    needSVM(ctx, true);
    const queue = ctx.createCommandQueue();
    try {
      const svm = ctx.svmAlloc(256, { fineGrain: true });
      const view = new Uint8Array(svm.arrayBuffer).fill(42);
      let inside: Record<string, unknown> | undefined;
      const event = queue.enqueueSVMFree([svm], {
        onFree: (_q, freed) => {
          let thrown: unknown;
          try {
            void freed[0].arrayBuffer;
          } catch (e) {
            thrown = e;
          }
          inside = {
            same: freed[0] === svm,
            alive: freed[0].alive,
            releasedError: thrown instanceof ReleasedError,
            all42: view.every((x) => x === 42),
          };
        },
      });
      assert.equal(svm.alive, false, "handed to the free at enqueue");
      await withTimeout(event.wait(), 5_000, "the SVM free");
      event.release();
      assert.deepEqual(inside, { same: true, alive: false, releasedError: true, all42: true });
    } finally {
      queue.release();
      ctx.release();
    }
  });
});

// --- Embree ---------------------------------------------------------------------------------------

describe("README, Embree", () => {
  test('"rtc.version (null until the first device; load() fills it at once)" (child process)', async () => {
    const r = await childReport("readme-rtc-version.ts");
    assert.equal(r.before, null);
    const loaded = r.loaded as Record<string, unknown>;
    assert.equal(typeof loaded.major, "number");
    assert.match(String(loaded.string), /^\d+\.\d+\.\d+/);
    assert.deepEqual(r.after, r.loaded);
    assert.equal(r.same, true, "rtc.version is the object load() returned");
  });

  test('"Only an explicit false refuses": a monitor returning 0, null, "", NaN or nothing allows', async () => {
    const device = rtc.newDevice("threads=1", { accounting: true });
    try {
      for (const answer of [0, null, "", NaN, undefined]) {
        let allocations = 0;
        device.setMemoryMonitorFunction((bytes, post) => {
          if (bytes > 0 && !post) allocations++;
          return answer as unknown as boolean;
        });
        const scene = device.newScene();
        scene.addTriangleMesh(...tri());
        await scene.commit();
        assert.equal(scene.committed, true, `answer ${String(answer)}`);
        scene.release();
        assert.ok(allocations > 0, `answer ${String(answer)}: the monitor was asked about allocations`);
        assert.equal(device.memory.denied, 0, `answer ${String(answer)}`);
      }
      // ...and `false` does refuse.
      device.setMemoryMonitorFunction((bytes) => !(bytes > 0));
      const scene = device.newScene();
      assert.throws(() => scene.addTriangleMesh(...tri()), EmbreeError);
      scene.release();
      assert.ok(device.memory.denied > 0);
    } finally {
      device.release();
    }
  });

  test('"a refusal only matters for allocations (bytes > 0)": a monitor refusing every free', async () => {
    const errors: unknown[] = [];
    onCallbackError((e) => void errors.push(e));
    const device = rtc.newDevice("threads=1", { accounting: true });
    let frees = 0;
    try {
      device.setMemoryMonitorFunction((bytes) => {
        if (bytes < 0) frees++;
        return bytes > 0;
      });
      const scene = device.newScene();
      scene.addTriangleMesh(...tri());
      await scene.commit();
      assert.equal(scene.committed, true);
      scene.release();
      device.release();
      assert.ok(frees > 0, "the monitor refused frees");
      assert.equal(device.memory.bytes, 0);
      assert.equal(device.memory.denied, 0);
      await sleep(10);
      assert.deepEqual(errors, []);
    } finally {
      device.release();
      onCallbackError(null);
    }
  });

  test('"The monitor ... a monitor that calls Embree: the allocations of that call run the monitor inside it"', async () => {
    const device = rtc.newDevice("threads=1", { accounting: true });
    let depth = 0;
    let maxDepth = 0;
    let nested = false;
    let nestedId: number | undefined;
    try {
      device.setMemoryMonitorFunction((bytes) => {
        depth++;
        maxDepth = Math.max(maxDepth, depth);
        try {
          if (bytes > 0 && !nested) {
            nested = true;
            const inner = device.newScene();
            nestedId = inner.addTriangleMesh(...tri());
            inner.release();
          }
        } finally {
          depth--;
        }
      });
      const scene = device.newScene();
      scene.addTriangleMesh(...tri());
      await scene.commit();
      scene.release();
      device.release();
      assert.equal(nested, true);
      assert.equal(nestedId, 0, "the scene made inside the monitor got its mesh");
      assert.ok(maxDepth >= 2, `the monitor was re-entered (max depth ${maxDepth})`);
      assert.equal(depth, 0);
      assert.equal(device.memory.bytes, 0, "every byte came back");
    } finally {
      device.release();
    }
  });

  test('"the commits of one device run one after another"', async () => {
    const device = rtc.newDevice("threads=0");
    const big = device.newScene();
    const small = device.newScene();
    try {
      const m = mesh(300_000);
      big.addTriangleMesh(m.vertices, m.indices);
      small.addTriangleMesh(...tri());
      const order: string[] = [];
      // The small commit alone takes microseconds, the big one tens of milliseconds: run at once,
      // the small would settle first. One after another, it settles after the big one, always.
      const commits = [big.commit().then(() => order.push("big")), small.commit().then(() => order.push("small"))];
      await withTimeout(Promise.all(commits), 9_000, "the commits");
      assert.deepEqual(order, ["big", "small"]);
    } finally {
      big.release();
      small.release();
      device.release();
    }
  });

  test(
    "\"Any other error belongs to the device's commit in flight\": 16 devices committing 6 scenes each at once; each refused commit's cause is what its own monitor threw during it, and every exception arrives once",
    async () => {
      /** What a monitor throws: which device, and which of its scenes it took to be committing. */
      class Thrown extends Error {
        device: number;
        scene: number;
        constructor(device: number, scene: number) {
          super(`device ${device}, scene ${scene}`);
          this.device = device;
          this.scene = scene;
        }
      }
      const reported: unknown[] = [];
      onCallbackError((error) => void reported.push(error));
      const devices: rtc.Device[] = [];
      const commits: Promise<void>[] = [];
      const thrown: Thrown[] = [];
      const causes: unknown[] = [];
      const misrouted: string[] = [];
      let committed = 0;
      try {
        for (let d = 0; d < 16; d++) {
          const device = rtc.newDevice(d % 2 ? "threads=1" : "threads=0");
          devices.push(device);
          // One device's commits run one after another, in call order: the one in flight is the
          // first not settled.
          let committing = 0;
          let armed = false;
          const rand = random(1000 + d);
          device.setMemoryMonitorFunction((bytes, post) => {
            // About 1 allocation in 40 refused: some commits fail, most succeed.
            if (armed && bytes > 0 && !post && rand() < 1 / 40) {
              const error = new Thrown(d, committing);
              thrown.push(error);
              throw error;
            }
          });
          const scenes = Array.from({ length: 6 }, (_, s) => {
            const scene = device.newScene();
            const m = randomMesh(random(d * 10 + s), 2_000 + 3_000 * s);
            scene.addTriangleMesh(m.vertices, m.indices);
            return scene;
          });
          armed = true;
          scenes.forEach((scene, s) => {
            commits.push(
              scene.commit().then(() => void committed++, (error) => {
                causes.push(error instanceof EmbreeError ? error.cause : error);
                const cause = error instanceof EmbreeError ? error.cause : undefined;
                if (!(cause instanceof Thrown) || cause.device !== d || cause.scene !== s) {
                  misrouted.push(`device ${d} scene ${s}: ${String(error)}, cause ${String(cause)}`);
                }
              }).finally(() => {
                committing = s + 1;
                scene.release();
              }),
            );
          });
        }
        await withTimeout(Promise.all(commits), 60_000, "96 commits");
        assert.deepEqual(misrouted, []);
        assert.ok(
          causes.length > 0 && committed > 0,
          `${causes.length} refused, ${committed} committed: the test needs both`,
        );
        // Each exception reached the program once: as a commit's cause, or else through onCallbackError.
        const delivered = [...causes, ...reported];
        assert.equal(new Set(delivered).size, delivered.length, "an exception was delivered twice");
        assert.deepEqual(new Set(delivered), new Set(thrown));
      } finally {
        await Promise.allSettled(commits);
        for (const device of devices) device.release();
        onCallbackError(null);
      }
    },
    70_000,
  );

  test(
    '"A scene released during its own commit is freed when the commit settles" and "A device outlives its scenes", at scale: 300 scenes of one device committed at once, released during and after their commits, the device released first',
    async () => {
      const reported: unknown[] = [];
      onCallbackError((error) => void reported.push(error));
      // Devices memlife still keeps: one is released natively once its last scene is. An earlier
      // test's scenes released while commits ran are released off the JS thread: wait for them, so
      // that the count can only come back to this by this test's device going.
      await until(() => liveStates() === 0, 10_000, "earlier tests' devices released natively");
      const devicesBefore = liveStates();
      const device = rtc.newDevice("threads=0", { accounting: true });
      let calls = 0;
      // Every 97th allocation refused: some commits fail (and some adds), the rest go through.
      device.setMemoryMonitorFunction((bytes, post) => !(bytes > 0 && !post && ++calls % 97 === 0));
      const m = mesh(3_000);
      const outcomes: Promise<string>[] = [];
      try {
        for (let i = 0; i < 300; i++) {
          const scene = device.newScene();
          try {
            scene.addTriangleMesh(m.vertices, m.indices);
          } catch (error) {
            assert.ok(error instanceof EmbreeError && error.codeName === "RTC_ERROR_OUT_OF_MEMORY", String(error));
          }
          const outcome = scene.commit().then(
            () => "ok",
            (error) => error instanceof EmbreeError ? error.codeName : String(error),
          );
          if (i % 3 === 0) {
            scene.release(); // during its own commit
            outcomes.push(outcome);
          } else {
            outcomes.push(outcome.finally(() => scene.release()));
          }
        }
        device.release(); // before any commit settled: its scenes keep it
        const settled = await withTimeout(Promise.all(outcomes), 60_000, "300 commits");
        assert.deepEqual([...new Set(settled)].sort(), ["RTC_ERROR_OUT_OF_MEMORY", "ok"]);
        // Releases made while other commits ran went off the JS thread: wait for them.
        await until(() => liveStates() === devicesBefore, 10_000, "the device released natively");
        assert.equal(device.memory.bytes, 0, "every scene was freed");
        assert.deepEqual(reported, []);
      } finally {
        await Promise.allSettled(outcomes);
        device.release();
        onCallbackError(null);
      }
    },
    70_000,
  );

  test('"while commits of different devices run at once"', async () => {
    // Forced order, no timing: device A's commit (one triangle: 2 allocations, from the thread that
    // runs the commit) starts device B's commit from A's monitor at its first allocation, then holds
    // at its second, spinning on the JS thread until B's commit has allocated. B's accounting is
    // settled in C (the native ledger), so B's counters move without the JS thread. If commits of
    // different devices ran one after another, B's could not start while A's is held: the wait
    // runs out and the test fails.
    const b = rtc.newDevice("threads=0", { accounting: true });
    const a = rtc.newDevice("threads=1");
    if (monitorDiagnostics(b).nativeLedger !== true) {
      a.release();
      b.release();
      skip("no native ledger in this process: B's accounting needs the JS thread that A's monitor holds");
    }
    const sceneA = a.newScene();
    const sceneB = b.newScene();
    let commitB: Promise<void> | undefined;
    try {
      sceneA.addTriangleMesh(...tri());
      const m = mesh(2_000);
      sceneB.addTriangleMesh(m.vertices, m.indices);
      const callsBefore = b.memory.calls;
      let armed = false;
      let allocations = 0;
      let sawB: boolean | undefined;
      a.setMemoryMonitorFunction((bytes) => {
        if (!armed || !(bytes > 0)) return;
        allocations++;
        if (allocations === 1) {
          // A's commit is in flight (its thread waits for this answer); B's starts now.
          commitB = sceneB.commit();
        } else if (allocations === 2) {
          const end = Date.now() + 5_000;
          while (b.memory.calls === callsBefore && Date.now() < end) {
            // spin: A's commit waits for this answer
          }
          sawB = b.memory.calls > callsBefore;
        }
      });
      armed = true;
      const commitA = sceneA.commit();
      await withTimeout(commitA, 9_000, "A's commit");
      armed = false;
      assert.ok(commitB, "A's commit asked its monitor about an allocation");
      await withTimeout(commitB, 9_000, "B's commit");
      assert.ok(allocations >= 2, `A's commit made ${allocations} allocations; the test needs 2`);
      assert.equal(sawB, true, "B's commit allocated while A's commit waited in A's monitor");
    } finally {
      await commitB?.catch(() => {});
      sceneA.release();
      sceneB.release();
      a.release();
      b.release();
    }
  });
});

// --- errors ---------------------------------------------------------------------------------------

describe("README, Errors", () => {
  test('"WorkerError { feature, runtime }": OpenCL in a Worker (child process)', async () => {
    const r = await childReport("readme-worker-host.ts");
    assert.equal(r.error, undefined, String(r.error));
    for (const call of ["getPlatforms", "createContext"]) {
      const e = r[call] as Record<string, unknown>;
      assert.equal(e.isWorkerError, true, `${call}: ${JSON.stringify(e)}`);
      assert.equal(e.name, "WorkerError");
      assert.equal(e.feature, "OpenCL");
      assert.equal(e.runtime, runtime);
      assert.match(String(e.message), new RegExp(`^OpenCL is not available in a Worker on ${runtime}: .+`));
    }
  });

  test('"WorkerError ... Nothing native was done": the refused OpenCL and Embree calls load no library and install no monitor (child process)', async () => {
    const r = await childReport("readme-worker-host.ts");
    assert.equal(r.error, undefined, String(r.error));
    assert.equal(r.openclMapped, false, "refusing OpenCL in the Worker opened libOpenCL");
    // Bun and Deno refuse the monitor, the budget and accounting in a Worker (README, Workers); Node allows them.
    const embreeRefused = runtime !== "node";
    for (
      const [call, feature] of [
        ["accountingDevice", "rtc.newDevice({ accounting: true })"],
        ["setMemoryMonitorFunction", "setMemoryMonitorFunction"],
        ["setMemoryBudget", "setMemoryBudget"],
      ]
    ) {
      if (!embreeRefused) {
        assert.equal(r[call], "allowed", `${call}: ${JSON.stringify(r[call])}`);
        continue;
      }
      const e = r[call] as Record<string, unknown>;
      assert.equal(e.isWorkerError, true, `${call}: ${JSON.stringify(e)}`);
      assert.equal(e.feature, feature);
      assert.equal(e.runtime, runtime);
    }
    if (embreeRefused) {
      assert.equal(r.embreeMappedByRefusal, false, "refusing { accounting: true } opened Embree");
      assert.equal(r.accounting, false, "a refused monitor or budget started accounting");
    } else {
      assert.equal(r.accounting, true);
    }
  });

  test('"No OpenCL platform: cl.getPlatforms() is empty and cl.createContext() throws ... CL_PLATFORM_NOT_FOUND_KHR" (child process)', async () => {
    const r = await childReport("readme-no-platform.ts", { OCL_ICD_VENDORS: "/nonexistent", OCL_ICD_FILENAMES: "" });
    assert.equal(r.platforms, 0);
    const e = r.context as Record<string, unknown>;
    assert.equal(e.isOpenCLError, true, JSON.stringify(e));
    assert.equal(e.codeName, "CL_PLATFORM_NOT_FOUND_KHR");
    assert.equal(e.fn, "clGetPlatformIDs");
    assert.match(String(e.message), /\/etc\/OpenCL\/vendors/);
    assert.match(String(e.message), /OCL_ICD_VENDORS/);
    assert.match(String(e.message), /OCL_ICD_FILENAMES/);
    // "... and the driver packages"
    assert.match(String(e.message), /pocl-opencl-icd/);
  });

  test('"LibraryLoadError { library, tried }: ... the cause of each failure" (child process)', async () => {
    const r = await childReport("readme-library-load.ts", {
      OPENCL_LIBRARY: "/nonexistent/libOpenCL.so.1",
      EMBREE_LIBRARY: "/nonexistent/libembree4.so.4",
    });
    const expected = {
      opencl: ["OpenCL", "/nonexistent/libOpenCL.so.1"],
      embree: ["Embree", "/nonexistent/libembree4.so.4"],
    };
    for (const [key, [library, path]] of Object.entries(expected)) {
      const e = r[key] as Record<string, unknown>;
      assert.equal(e.isLibraryLoadError, true, `${key}: ${JSON.stringify(e)}`);
      assert.equal(e.name, "LibraryLoadError");
      assert.equal(e.library, library);
      assert.ok((e.tried as string[]).includes(path), `${key}: tried ${JSON.stringify(e.tried)}`);
      assert.match(String(e.message), /Failures: \/nonexistent\/\S+: .+/);
    }
  });
});

// --- loading the libraries ------------------------------------------------------------------------

/** The names README's "Loading" and `LibraryLoadError` promise memlife searches on Linux, in order. */
const searched = {
  embree: ["libembree4.so.4", "libembree4.so", "libembree3.so.3", "libembree3.so"],
  opencl: ["libOpenCL.so.1", "libOpenCL.so"],
};

/**
 * A directory for LD_LIBRARY_PATH, searched before the system's: `files` maps a library name to a
 * file to link there, or to null for a file that is no library (the dynamic loader stops at the
 * first file of a name it finds, and fails on it).
 */
function shadow(files: Record<string, string | null>): { dir: string; [Symbol.dispose](): void } {
  const dir = mkdtempSync(join(tmpdir(), "memlife-shadow-"));
  for (const [name, target] of Object.entries(files)) {
    if (target === null) writeFileSync(join(dir, name), "not a library\n");
    else symlinkSync(target, join(dir, name));
  }
  return { dir, [Symbol.dispose]: () => rmSync(dir, { recursive: true, force: true }) };
}

/** The file of the Embree the dynamic loader's cache lists (Embree 4 first), resolved; undefined if none. */
function installedEmbree(): string | undefined {
  const cache = ["ldconfig", "/sbin/ldconfig", "/usr/sbin/ldconfig"]
    .map((ldconfig) => spawnSync(ldconfig, ["-p"], { encoding: "utf8" }))
    .find((r) => r.status === 0)?.stdout ?? "";
  for (const name of ["libembree4.so.4", "libembree3.so.3"]) {
    const path = new RegExp(`^\\s*${name.replaceAll(".", "\\.")} .*=> (\\S+)$`, "m").exec(cache)?.[1];
    if (path !== undefined) return realpathSync(path);
  }
  return undefined;
}

/** The child's environment: only LD_LIBRARY_PATH decides (empty override variables read as unset). */
const searchEnv = (dir: string) => ({ LD_LIBRARY_PATH: dir, OPENCL_LIBRARY: "", EMBREE_LIBRARY: "" });

describe("README, loading the libraries (child processes; LD_LIBRARY_PATH shadows the names searched)", () => {
  test('"EMBREE_LIBRARY, then libembree4.so.4, libembree4.so ..., then the same for Embree 3": when none loads, LibraryLoadError lists every path tried, in order, with the cause of each failure and the packages', async () => {
    if (process.platform !== "linux") skip("the search list checked here is Linux's");
    using dir = shadow(Object.fromEntries([...searched.embree, ...searched.opencl].map((name) => [name, null])));
    const r = await childReport("readme-library-load.ts", searchEnv(dir.dir));
    const packages = { embree: /libembree3-3.*libembree4-4/, opencl: /ocl-icd-libopencl1 pocl-opencl-icd/ };
    for (const key of ["embree", "opencl"] as const) {
      const e = r[key] as Record<string, unknown>;
      assert.equal(e.isLibraryLoadError, true, `${key}: ${JSON.stringify(e)}`);
      assert.equal(e.library, key === "embree" ? "Embree" : "OpenCL");
      assert.deepEqual(e.tried, searched[key], `${key}: every name, most preferred first`);
      const message = String(e.message);
      assert.match(message, packages[key], `${key}: the packages that provide it`);
      const failures = message.slice(message.indexOf("Failures: ") + "Failures: ".length).split("; ");
      assert.equal(failures.length, searched[key].length, `${key}: one cause per path: ${message}`);
      searched[key].forEach((name, i) => {
        // Each cause is that file's own: the loader's reason names the file it found in the directory.
        assert.ok(failures[i].startsWith(`${name}: `), `${key}: failure ${i} is ${name}'s: ${failures[i]}`);
        assert.ok(failures[i].includes(join(dir.dir, name)), `${key}: ${name}'s cause: ${failures[i]}`);
      });
    }
  });

  test('"the first call loads Embree 4, else 3": a libembree4.so.4 is taken before Embree 3, and one that does not load is passed over', async () => {
    if (process.platform !== "linux") skip("the search list checked here is Linux's");
    // The Embree this machine has, as a file (from the loader's cache, not from memlife's search),
    // to stand in for each name.
    const real = installedEmbree();
    if (real === undefined) skip("ldconfig -p lists no libembree4.so.4 or libembree3.so.3");
    // Every name shadowed, so that what this machine has installed decides nothing.
    {
      using dir = shadow(Object.fromEntries(searched.embree.map((name) => [name, real])));
      const r = await childReport("readme-library-load.ts", searchEnv(dir.dir));
      assert.deepEqual(r.embree, { path: "libembree4.so.4", file: real }, "the Embree 4 name is taken first");
    }
    {
      const [four, fourDev, three, threeDev] = searched.embree;
      using dir = shadow({ [four]: null, [fourDev]: null, [three]: real, [threeDev]: real });
      const r = await childReport("readme-library-load.ts", searchEnv(dir.dir));
      assert.deepEqual(r.embree, { path: three, file: real }, "Embree 4's names that do not load are passed over");
    }
  });

  test('"OPENCL_LIBRARY and EMBREE_LIBRARY override the search": a path set there is opened, whatever the search would find', async () => {
    if (process.platform !== "linux") skip("the search list checked here is Linux's");
    const plain = await childReport("readme-library-load.ts", { OPENCL_LIBRARY: "", EMBREE_LIBRARY: "" });
    const files = {
      opencl: (plain.opencl as { file?: string }).file,
      embree: (plain.embree as { file?: string }).file,
    };
    if (files.opencl === undefined || files.embree === undefined) {
      skip(`a library does not load here: ${JSON.stringify(plain)}`);
    }
    using dir = shadow(Object.fromEntries([...searched.embree, ...searched.opencl].map((name) => [name, null])));
    const r = await childReport("readme-library-load.ts", {
      // The machine's own path after the shadows: what the libraries need (the GPU machine's
      // carried Embree 4 finds its TBB there) is still found, the names searched are not.
      LD_LIBRARY_PATH: [dir.dir, process.env.LD_LIBRARY_PATH ?? ""].filter((p) => p !== "").join(":"),
      OPENCL_LIBRARY: files.opencl,
      EMBREE_LIBRARY: files.embree,
    });
    assert.deepEqual(r.opencl, { path: files.opencl, file: files.opencl });
    assert.deepEqual(r.embree, { path: files.embree, file: files.embree });
  });
});
