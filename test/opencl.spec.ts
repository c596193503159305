/** OpenCL: the seeds' semantics (destructor callbacks, SVM free), errors, threads, lifetimes. */
import { afterAll, describe, test } from "vitest";
import { assert, gc, runScript, runtime, skip, sleep, withTimeout } from "./helpers.ts";
import { cl, LibraryLoadError, onCallbackError, OpenCLError, ReleasedError, runtime as loaded } from "../src/mod.ts";

const ctx = cl.createContext();
const device = ctx.devices[0];
const queue = ctx.createCommandQueue();
afterAll(() => {
  queue.release();
  ctx.release();
});

function needSVM(fineGrain = false): void {
  if (!device.svm.coarseGrainBuffer) skip(`device "${device.name}" has no SVM (CL_DEVICE_SVM_CAPABILITIES = 0)`);
  if (fineGrain && !device.svm.fineGrainBuffer) skip(`device "${device.name}" has no fine-grain SVM buffers`);
}

/** Collects errors that callbacks throw, instead of the default (rethrow as uncaught). */
function captureCallbackErrors(): { errors: unknown[]; stop: () => void } {
  const errors: unknown[] = [];
  onCallbackError((error) => errors.push(error));
  return { errors, stop: () => onCallbackError(null) };
}

test(`the ${runtime} backend is the one loaded`, () => {
  assert.equal(loaded, runtime);
});

describe("platforms and devices", () => {
  test("platforms and devices have their info", () => {
    const platforms = cl.getPlatforms();
    assert.ok(platforms.length > 0);
    for (const p of platforms) {
      assert.match(p.version, /^OpenCL \d+\.\d+/);
      assert.ok(p.name.length > 0);
      for (const d of p.getDevices()) {
        assert.ok(d.name.length > 0 && d.globalMemSize > 0 && d.maxMemAllocSize > 0);
        assert.ok(d.maxMemAllocSize <= d.globalMemSize);
        assert.equal(typeof d.svm.fineGrainBuffer, "boolean");
        assert.ok(["cpu", "gpu", "accelerator", "custom", "default"].includes(d.type));
      }
    }
    assert.throws(() => platforms[0].getDevices(0), RangeError);
  });

  test("a device given twice to createContext counts once, as OpenCL ignores duplicates (a hostile pass)", () => {
    const [device] = cl.getPlatforms()[0].getDevices();
    const again = cl.getPlatforms()[0].getDevices()[0]; // another wrapper of the same cl_device_id
    using ctx = cl.createContext([device, again, device]);
    assert.equal(ctx.devices.length, 1);
    assert.equal(ctx.devices[0], device);
    using queue = ctx.createCommandQueue(again); // the same device, by its handle
    assert.equal(queue.device.unsafeHandle, device.unsafeHandle);
  });
});

describe("clSetMemObjectDestructorCallback", () => {
  test("three destructor callbacks run in reverse order, each once, never inside release()", async () => {
    const buf = ctx.createBuffer(1024);
    const order: number[] = [];
    let inRelease = false;
    let ranInside = false;
    for (const n of [1, 2, 3]) {
      buf.setDestructorCallback((b) => {
        if (inRelease) ranInside = true;
        assert.equal(b, buf);
        order.push(n);
      });
    }
    inRelease = true;
    buf.release();
    inRelease = false;
    await withTimeout(buf.destroyed, 10_000, "destroyed");
    assert.deepEqual(order, [3, 2, 1]);
    assert.equal(ranInside, false);
    await sleep(20);
    assert.deepEqual(order, [3, 2, 1], "no callback ran twice");
  });

  test("a buffer released while a queued command uses it is destroyed after the command", async () => {
    const gate = ctx.createUserEvent();
    const buf = ctx.createBuffer(4096);
    let destroyed = false;
    buf.setDestructorCallback(() => (destroyed = true));
    const write = queue.enqueueWriteBuffer(buf, new Uint8Array(4096).fill(1), { waitFor: [gate] });
    queue.flush();
    buf.release();
    assert.throws(() => buf.referenceCount, ReleasedError);
    await sleep(50);
    assert.equal(destroyed, false, "the write command still holds the buffer");
    gate.setStatus(cl.ExecutionStatus.COMPLETE);
    await write.wait();
    await queue.finish();
    await withTimeout(buf.destroyed, 10_000, "destroyed");
    assert.equal(destroyed, true);
    write.release();
    gate.release();
  });

  test("a throwing callback does not stop the others; destroyed rejects, and onCallbackError is not called too", async () => {
    const { errors, stop } = captureCallbackErrors();
    try {
      const buf = ctx.createBuffer(64);
      const ran: string[] = [];
      buf.setDestructorCallback(() => ran.push("first"));
      buf.setDestructorCallback(() => {
        throw new Error("boom");
      });
      buf.setDestructorCallback(() => ran.push("last"));
      const destroyed = buf.destroyed;
      buf.release();
      await assert.rejects(withTimeout(destroyed, 10_000, "destroyed"), /boom/);
      assert.deepEqual(ran, ["last", "first"]);
      assert.equal(errors.length, 0, "the exception reaches the program once: through destroyed");
      // README: a promise asked for after that resolves (the program has the exception already).
      await withTimeout(buf.destroyed, 1_000, "destroyed read again");
    } finally {
      stop();
    }
  });

  test("an uncaught callback error surfaces as an uncaught exception (child process)", async () => {
    const result = await runScript(new URL("./fixtures/opencl-throwing-callback.ts", import.meta.url), [], {
      timeout: 30_000,
    });
    assert.equal(result.timedOut, false);
    assert.notEqual(result.code, 0, "an uncaught error must not exit 0");
    assert.match(result.stdout + result.stderr, /destructor says no/);
  });

  test("an uncaught callback error that cannot be printed (a revoked Proxy) ends the program too, named (child process)", async () => {
    const result = await runScript(
      new URL("./fixtures/opencl-throwing-callback.ts", import.meta.url),
      ["unprintable"],
      { timeout: 30_000 },
    );
    assert.equal(result.timedOut, false);
    const out = result.stdout + result.stderr;
    assert.doesNotMatch(out, /still running after the callback threw/, "the exception was lost");
    assert.notEqual(result.code, 0, `an uncaught error must not exit 0:\n${out}`);
    assert.match(out, /cannot be printed/);
  });

  test("destroyed settles for a buffer with no callbacks, if read before release", async () => {
    const buf = ctx.createBuffer(128);
    const destroyed = buf.destroyed;
    buf.release();
    await withTimeout(destroyed, 10_000, "destroyed");
    const late = ctx.createBuffer(128);
    late.release();
    await assert.rejects(late.destroyed, ReleasedError);
  });

  test("retain() needs a matching release() before the object is destroyed", async () => {
    const buf = ctx.createBuffer(256);
    buf.retain();
    assert.equal(buf.referenceCount, 2);
    let destroyed = false;
    buf.setDestructorCallback(() => (destroyed = true));
    buf.release();
    await sleep(20);
    assert.equal(destroyed, false);
    assert.equal(buf.referenceCount, 1);
    buf.release();
    await withTimeout(buf.destroyed, 10_000, "destroyed");
    assert.equal(destroyed, true);
    buf.release(); // a further release is a no-op
    assert.throws(() => buf.setDestructorCallback(() => {}), ReleasedError);
  });
});

describe("buffers", () => {
  test("hostPtr copy, use and alloc hold the data", async () => {
    const data = Float32Array.from({ length: 256 }, (_, i) => i * 0.5);
    for (const hostPtr of ["copy", "use", "alloc"] as const) {
      const buf = ctx.createBuffer(data, { hostPtr });
      const back = await queue.readBuffer(buf, new Float32Array(256));
      assert.deepEqual(back, data, hostPtr);
      buf.release();
    }
    const plain = ctx.createBuffer(16, { access: "read_only" });
    assert.equal(plain.flags & cl.MemFlags.READ_ONLY, cl.MemFlags.READ_ONLY);
    plain.release();
  });

  test("a hostPtr use buffer works on the caller's memory", async () => {
    const host = new Uint8Array(64);
    const buf = ctx.createBuffer(host, { hostPtr: "use" });
    assert.equal(buf.hostPointer !== 0n, true);
    await queue.writeBuffer(buf, new Uint8Array(64).fill(9));
    await queue.readBuffer(buf, new Uint8Array(64)); // makes the device copy visible to the host on every driver
    buf.release();
    await withTimeout(buf.destroyed, 10_000, "destroyed");
  });

  test("bad arguments throw TypeError or RangeError before any native call", () => {
    assert.throws(() => ctx.createBuffer(0), RangeError);
    assert.throws(() => ctx.createBuffer(-1), RangeError);
    assert.throws(() => ctx.createBuffer(1.5), RangeError);
    assert.throws(() => ctx.createBuffer("12" as unknown as number), TypeError);
    assert.throws(() => ctx.createBuffer(16, { hostPtr: "use" }), TypeError);
    assert.throws(() => ctx.createBuffer(new Uint8Array(4), { hostPtr: "borrow" as "use" }), TypeError);
    assert.throws(() => ctx.createBuffer(16, { access: "rw" as "read_write" }), TypeError);
    const buf = ctx.createBuffer(16);
    assert.throws(() => buf.setDestructorCallback(null as unknown as () => void), TypeError);
    assert.throws(() => queue.enqueueWriteBuffer(buf, new Uint8Array(32)), RangeError);
    assert.throws(() => queue.enqueueReadBuffer(buf, new Uint8Array(4), { offset: -1 }), RangeError);
    buf.release();
  });

  test("native failures are OpenCLErrors naming the function and code", () => {
    // Overlapping ranges of one buffer: every driver checks this one (CL_MEM_COPY_OVERLAP), memlife does not.
    const buf = ctx.createBuffer(16);
    try {
      assert.throws(
        () => queue.enqueueCopyBuffer(buf, buf, { srcOffset: 0, dstOffset: 4, size: 8 }),
        (e: unknown) =>
          e instanceof OpenCLError && e.fn === "clEnqueueCopyBuffer" && e.codeName === "CL_MEM_COPY_OVERLAP" &&
          e.code === -8,
      );
    } finally {
      buf.release();
    }
  });

  test("a buffer over CL_DEVICE_MAX_MEM_ALLOC_SIZE is CL_INVALID_BUFFER_SIZE where the driver checks it", () => {
    let big: cl.Buffer;
    try {
      big = ctx.createBuffer(device.maxMemAllocSize + 1);
    } catch (e) {
      assert.ok(
        e instanceof OpenCLError && e.fn === "clCreateBuffer" && e.codeName === "CL_INVALID_BUFFER_SIZE" &&
          e.code === -61,
        String(e),
      );
      return;
    }
    // NVIDIA allocates lazily and accepts the size (driver 580): not an error memlife can raise.
    big.release();
    skip(`${device.platform.name} accepts a buffer of maxMemAllocSize + 1 bytes without error`);
  });

  test("use after release throws ReleasedError; a second release is a no-op", () => {
    const buf = ctx.createBuffer(16);
    buf.release();
    buf.release();
    buf[Symbol.dispose]();
    assert.throws(() => buf.retain(), ReleasedError);
    assert.throws(() => queue.enqueueWriteBuffer(buf, new Uint8Array(4)), ReleasedError);
    const other = cl.createContext([device]);
    other.release();
    other.release();
    assert.throws(() => other.createBuffer(16), ReleasedError);
  });

  test("using disposes at the end of the block", async () => {
    let destroyed: Promise<void>;
    {
      using buf = ctx.createBuffer(32);
      destroyed = buf.destroyed;
    }
    await withTimeout(destroyed, 10_000, "destroyed");
  });
});

describe("the seeds' error codes, through the raw bindings", () => {
  const s = cl.library().symbols;
  test("clSetMemObjectDestructorCallback: CL_INVALID_MEM_OBJECT, CL_INVALID_VALUE", () => {
    assert.equal(s.clSetMemObjectDestructorCallback(null, null, 0), -38);
    const buf = ctx.createBuffer(16);
    assert.equal(s.clSetMemObjectDestructorCallback(buf.unsafeHandle, null, 0), -30);
    buf.release();
    assert.equal(new OpenCLError("clSetMemObjectDestructorCallback", -38).codeName, "CL_INVALID_MEM_OBJECT");
  });

  test("clEnqueueSVMFree: CL_INVALID_COMMAND_QUEUE, CL_INVALID_VALUE, CL_INVALID_EVENT_WAIT_LIST", () => {
    needSVM();
    const a = ctx.svmAlloc(64);
    const pointers = new BigUint64Array([a.address]);
    const events = new BigUint64Array(new ArrayBuffer(8));
    const q = queue.unsafeHandle;
    assert.equal(s.clEnqueueSVMFree(null, 1, pointers, null, 0, 0, null, null), -36);
    assert.equal(s.clEnqueueSVMFree(q, 0, pointers, null, 0, 0, null, null), -30);
    assert.equal(s.clEnqueueSVMFree(q, 1, null, null, 0, 0, null, null), -30);
    assert.equal(s.clEnqueueSVMFree(q, 1, pointers, null, 0, 1, null, null), -57);
    assert.equal(s.clEnqueueSVMFree(q, 1, pointers, null, 0, 0, events, null), -57);
    a.release(); // every call above failed: the allocation is still ours to free
  });

  test("a failed event in waitFor fails the command: CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST", async () => {
    const gate = ctx.createUserEvent();
    const buf = ctx.createBuffer(16);
    const write = queue.enqueueWriteBuffer(buf, new Uint8Array(16), { waitFor: [gate] });
    gate.setStatus(-1);
    await assert.rejects(
      write.wait(),
      (e: unknown) => e instanceof OpenCLError && e.code === -14 && e.fn === "clWaitForEvents",
    );
    assert.ok(write.status < 0);
    write.release();
    gate.release();
    buf.release();
    await queue.finish().catch(() => {});
  });

  test("a waitFor list of foreign objects is a TypeError", () => {
    needSVM();
    const a = ctx.svmAlloc(64);
    assert.throws(() => queue.enqueueSVMFree([a], { waitFor: [{}] as unknown as cl.Event[] }), TypeError);
    assert.throws(() => queue.enqueueSVMFree([a, a]), TypeError);
    a.release();
  });
});

describe("clEnqueueSVMFree", () => {
  test("an SVM free's status reads COMPLETE only once onFree ran (as in C, where the callback runs first)", async () => {
    needSVM();
    let called = false;
    const event = queue.enqueueSVMFree([ctx.svmAlloc(1024)], { onFree: () => void (called = true) });
    queue.flush();
    // onFree runs on the JS thread, after this synchronous loop: COMPLETE must not be read meanwhile.
    const seen = new Set<number>();
    for (const until = Date.now() + 100; Date.now() < until;) seen.add(event.status);
    assert.ok(!seen.has(cl.ExecutionStatus.COMPLETE), `read ${[...seen].join(", ")} before onFree ran`);
    await withTimeout(event.wait(), 10_000, "event.wait()");
    assert.equal(called, true);
    assert.equal(event.status, cl.ExecutionStatus.COMPLETE);
    event.release();
  });

  test("32 allocations of 1 KiB freed with onFree: same allocations in order, queue usable inside", async () => {
    needSVM();
    const allocs = Array.from({ length: 32 }, () => ctx.svmAlloc(1024));
    const addresses = allocs.map((a) => a.address);
    let seen: { queue: cl.CommandQueue; allocs: cl.SVMAllocation[] } | undefined;
    let innerFree: cl.Event | undefined;
    const event = queue.enqueueSVMFree(allocs, {
      onFree: (q, freed) => {
        seen = { queue: q, allocs: freed };
        // the queue is usable inside the callback
        innerFree = q.enqueueSVMFree([ctx.svmAlloc(64)]);
        q.flush();
      },
    });
    assert.equal(event.commandType, cl.CommandType.SVM_FREE);
    assert.equal(event.commandType, 0x1209);
    await withTimeout(event.wait(), 10_000, "event.wait()");
    assert.ok(seen, "onFree ran before wait() settled");
    assert.equal(seen.queue, queue);
    assert.deepEqual(seen.allocs, allocs);
    assert.deepEqual(seen.allocs.map((_a, i) => addresses[i]), addresses);
    assert.throws(() => allocs[0].address, ReleasedError);
    await withTimeout(innerFree!.wait(), 10_000, "inner free");
    innerFree!.release();
    event.release();
  });

  test("without onFree, allocations are freed by OpenCL and unusable at once", async () => {
    needSVM();
    const allocs = [ctx.svmAlloc(256), ctx.svmAlloc(512)];
    const event = queue.enqueueSVMFree(allocs);
    assert.throws(() => allocs[1].address, ReleasedError);
    assert.throws(() => queue.enqueueSVMFree(allocs), ReleasedError);
    allocs[0].release(); // already freed: a no-op
    await withTimeout(event.wait(), 10_000, "wait");
    event.release();
  });

  test("a throwing onFree still frees every allocation and rejects the pending wait() (only)", async () => {
    needSVM();
    const { errors, stop } = captureCallbackErrors();
    try {
      const event = queue.enqueueSVMFree([ctx.svmAlloc(64)], {
        onFree: () => {
          throw new Error("onFree failed");
        },
      });
      await assert.rejects(withTimeout(event.wait(), 10_000, "wait"), /onFree failed/);
      await queue.finish();
      assert.equal(errors.length, 0, "the exception reaches the program once: through wait()");
      event.release();
    } finally {
      stop();
    }
  });

  test("fine-grain SVM is visible from the host as an ArrayBuffer", () => {
    needSVM(true);
    const a = ctx.svmAlloc(256, { fineGrain: true });
    const bytes = new Uint8Array(a.arrayBuffer);
    bytes.fill(5);
    assert.equal(new Uint8Array(a.arrayBuffer)[255], 5);
    a.release();
    assert.throws(() => a.arrayBuffer, ReleasedError);
  });

  test("svmAlloc checks its arguments first", () => {
    needSVM();
    assert.throws(() => ctx.svmAlloc(0), RangeError);
    assert.throws(() => ctx.svmAlloc(64, { alignment: 3 }), RangeError);
    assert.throws(() => ctx.svmAlloc(device.maxMemAllocSize + 1), RangeError);
    assert.throws(() => ctx.svmAlloc(64, { atomics: true }), TypeError);
  });
});

describe("threads", () => {
  test("an SVM free callback from a PoCL worker arrives while the JS thread awaits finish()", async () => {
    needSVM();
    let freed = 0;
    for (let i = 0; i < 8; i++) queue.enqueueSVMFree([ctx.svmAlloc(4096)], { onFree: () => freed++ }).release();
    await withTimeout(queue.finish(), 10_000, "finish()");
    assert.equal(freed, 8);
  });

  test("a callback from a worker arrives while the JS thread is idle", async () => {
    needSVM();
    const gate = ctx.createUserEvent();
    const arrived = new Promise<void>((resolve) => {
      queue.enqueueSVMFree([ctx.svmAlloc(64)], { onFree: () => resolve(), waitFor: [gate] }).release();
    });
    queue.flush();
    setTimeout(() => gate.setStatus(0), 20);
    await withTimeout(arrived, 10_000, "onFree while idle");
    gate.release();
  });

  test("a destructor from a command's worker arrives while the JS thread awaits", async () => {
    const gate = ctx.createUserEvent();
    const buf = ctx.createBuffer(1 << 16);
    const destroyed = buf.destroyed;
    queue.enqueueWriteBuffer(buf, new Uint8Array(1 << 16), { waitFor: [gate] }).release();
    queue.flush();
    buf.release();
    setTimeout(() => gate.setStatus(0), 20);
    await withTimeout(destroyed, 10_000, "destroyed");
    gate.release();
  });

  test("releasing a queue and context with frees in flight neither deadlocks nor loses a callback", async () => {
    needSVM();
    const c = cl.createContext([device]);
    const q = c.createCommandQueue();
    const gate = c.createUserEvent();
    let freed = false;
    const event = q.enqueueSVMFree([c.svmAlloc(128)], { onFree: () => (freed = true), waitFor: [gate] });
    q.flush();
    q.release();
    c.release();
    gate.setStatus(0);
    await withTimeout(event.wait(), 10_000, "wait after release");
    assert.equal(freed, true);
    event.release();
    gate.release();
  });

  test("a context released before its children: they keep working, and the context goes last", async () => {
    const c = cl.createContext([device]);
    const q = c.createCommandQueue();
    const b = c.createBuffer(new Uint8Array(256).fill(3));
    const a = device.svm.coarseGrainBuffer ? c.svmAlloc(256) : undefined;
    let destroyed = 0;
    b.setDestructorCallback(() => destroyed++);
    c.release();
    assert.throws(() => c.createBuffer(16), ReleasedError);
    const back = await q.readBuffer(b, new Uint8Array(256));
    assert.equal(back[255], 3);
    b.release(); // on NVIDIA a last release that tears the context down waits for callback threads
    await withTimeout(b.destroyed, 10_000, "destroyed");
    a?.release();
    q.release();
    await q.finish().catch(() => {}); // released: ReleasedError, swallowed
    assert.equal(destroyed, 1);
  });

  test(
    "awaiting destroyed or an SVM free with nothing else pending keeps the program alive (child process)",
    async () => {
      const result = await runScript(new URL("./fixtures/opencl-await-destroyed.ts", import.meta.url), [], {
        timeout: 30_000,
      });
      assert.equal(result.timedOut, false, "the child hung");
      assert.equal(result.code, 0, result.stderr); // Node exits 13 when a top-level await can never settle
      assert.equal(result.stdout.trim(), "callbacks 23");
    },
    40_000,
  );

  test("exit with callbacks in flight exits with the program's own code (child process)", async () => {
    const result = await runScript(new URL("./fixtures/opencl-exit.ts", import.meta.url), [], { timeout: 30_000 });
    assert.equal(result.timedOut, false, "the child hung");
    assert.equal(result.code, 3, result.stderr);
  });

  test("the program's own exit listeners still run, and its exit code stands (child process)", async () => {
    const result = await runScript(new URL("./fixtures/exit-listeners.ts", import.meta.url), [], { timeout: 30_000 });
    assert.equal(result.timedOut, false, "the child hung");
    assert.equal(result.code, 4, result.stderr);
    assert.equal(result.stdout.trim(), runtime === "deno" ? "unload listener ran" : "exit listener ran with 4");
  });

  test(
    "a program that ends while its kernels are still compiled and run ends cleanly, 6 times per way out (child processes)",
    async () => {
      const expected: Record<string, number> = { plain: 0, release: 0, exit: 3, throw: 1 };
      for (const [mode, code] of Object.entries(expected)) {
        for (let run = 0; run < 6; run++) {
          const result = await runScript(new URL("./fixtures/opencl-exit-running.ts", import.meta.url), [mode], {
            timeout: 30_000,
          });
          const what = `${mode}, run ${run + 1}: ${result.stderr.slice(-1500)}`;
          assert.equal(result.timedOut, false, `the child hung (${what})`);
          assert.equal(result.signal, null, `the child died of ${result.signal} (${what})`);
          assert.equal(result.code, code, what);
          assert.equal(result.stdout.trim(), "ok", what);
        }
      }
    },
    120_000,
  );
});

describe("lifetimes", () => {
  test("a buffer with a destructor callback dropped without release() is held: GC neither collects it nor calls back (README, Lifetimes)", async () => {
    const local = cl.createContext();
    let called = 0;
    let weak: WeakRef<cl.Buffer> | undefined;
    (() => {
      const buf = local.createBuffer(4096);
      buf.setDestructorCallback(() => void called++);
      weak = new WeakRef(buf);
    })();
    for (let i = 0; i < 10; i++) {
      gc();
      await sleep(10);
    }
    const buf = weak!.deref();
    assert.ok(buf !== undefined, "the dropped buffer was collected");
    assert.equal(called, 0, "its destructor callback ran without a release");
    assert.equal(local.liveObjects, 1);
    buf.release();
    await withTimeout(buf.destroyed, 10_000, "destroyed");
    assert.equal(called, 1);
    local.release();
  });

  test("a hostPtr use buffer keeps its memory through forced GC until destroyed", async () => {
    let buf: cl.Buffer | undefined;
    let weak: WeakRef<Uint8Array>;
    {
      const host = new Uint8Array(1 << 20).fill(42);
      weak = new WeakRef(host);
      buf = ctx.createBuffer(host, { hostPtr: "use" });
    }
    for (let i = 0; i < 3; i++) {
      gc();
      await sleep(0);
    }
    assert.ok(weak.deref() !== undefined, "the host memory is pinned while the buffer lives");
    const back = await queue.readBuffer(buf, new Uint8Array(1 << 20));
    assert.equal(back[0], 42);
    assert.equal(back[(1 << 20) - 1], 42);
    const destroyed = buf.destroyed;
    buf.release();
    buf = undefined;
    await withTimeout(destroyed, 10_000, "destroyed");
  });

  test("100 000 buffers with callbacks under forced GC: every callback exactly once", async () => {
    const n = 100_000;
    const counts = new Uint8Array(n);
    for (let i = 0; i < n; i++) {
      const buf = ctx.createBuffer(64);
      buf.setDestructorCallback(() => counts[i]++);
      buf.release();
      if (i % 20_000 === 0) gc();
    }
    let last: Promise<void> | undefined;
    {
      const buf = ctx.createBuffer(64);
      last = buf.destroyed;
      buf.release();
    }
    gc();
    await withTimeout(last, 30_000, "last destroyed");
    await queue.finish();
    await sleep(10);
    let once = 0;
    for (let i = 0; i < n; i++) if (counts[i] === 1) once++;
    assert.equal(once, n);
  }, 120_000);

  test("buffers dropped without release are released by the safety net", async () => {
    const before = ctx.referenceCount;
    for (let i = 0; i < 1000; i++) ctx.createBuffer(64);
    await sleep(10); // the nursery registers survivors at the end of the turn
    // Finalizers run from the event loop and release off the JS thread: on a busy machine, later.
    for (let i = 0; i < 250 && ctx.referenceCount > before + 10; i++) {
      gc();
      await sleep(20);
    }
    assert.ok(ctx.referenceCount <= before + 10, `context references: ${before} before, ${ctx.referenceCount} after`);
  }, 30_000);

  test("a released event the program still holds does not keep its dropped queue from the safety net", async () => {
    // A hostile pass: the event's command tracker, a closure over its queue, outlived its release.
    const local = cl.createContext();
    const kept: cl.Event[] = [];
    let queue: WeakRef<cl.CommandQueue>;
    (() => {
      const q = local.createCommandQueue();
      queue = new WeakRef(q);
      const marker = q.enqueueMarker();
      marker.release();
      kept.push(marker);
      const write = q.enqueueWriteBuffer(local.createBuffer(16), new Uint8Array(16));
      write.release();
      kept.push(write);
    })();
    // deref() keeps its target alive until the job ends: never in the job of a gc().
    let collected = false;
    for (let i = 0; i < 100 && !(collected && local.liveObjects === 0); i++) {
      gc();
      await sleep(20);
      collected = queue!.deref() === undefined;
      await sleep(0);
    }
    assert.equal(collected, true, "the queue was never collected");
    assert.equal(local.liveObjects, 0);
    assert.equal(kept.length, 2);
    local.release();
  }, 30_000);
});

describe("references: retain() and release()", () => {
  /** Polls `done` for up to ~5 s: native releases of queues and contexts run off the JS thread. */
  async function until(done: () => boolean): Promise<void> {
    for (let i = 0; i < 500 && !done(); i++) await sleep(10);
  }

  test("an object counts once among its context's children, however many references it has (every kind)", async () => {
    const local = cl.createContext();
    const program = local.createProgram("__kernel void k(__global int *x) { x[0] = 1; }");
    await program.build();
    const makers: [string, () => { retain(): unknown; release(): void }][] = [
      ["buffer", () => local.createBuffer(64)],
      ["queue", () => local.createCommandQueue()],
      ["user event", () => local.createUserEvent()],
      ["program", () => local.createProgram("__kernel void k() {}")],
      ["kernel", () => program.createKernel("k")],
    ];
    for (const [kind, make] of makers) {
      const before = local.liveObjects;
      const object = make();
      object.retain();
      object.retain();
      object.release();
      object.release();
      await sleep(20); // a queue's release is native off the JS thread
      assert.equal(local.liveObjects, before + 1, `${kind}: alive with one reference left`);
      object.release();
      await until(() => local.liveObjects === before);
      assert.equal(local.liveObjects, before, `${kind}: released`);
    }
    program.release();
    local.release();
  });

  test("a queue retained and released before its context was released does not end the context under a live SVM allocation", async () => {
    needSVM();
    const local = cl.createContext(ctx.devices as cl.Device[]);
    const q = local.createCommandQueue();
    const allocation = local.svmAlloc(4096);
    q.retain();
    q.release();
    local.release(); // its children keep working (README, Lifetimes)
    q.release();
    await sleep(50);
    assert.equal(local.liveObjects, 1, "the allocation is the one child left");
    allocation.release(); // frees through the context: ReleasedError when the context was ended early
    await until(() => local.liveObjects === 0);
    assert.equal(local.liveObjects, 0);
  });

  test("the safety net releases every reference a dropped object held, retain() included (every kind)", async () => {
    const { symbols } = cl.library();
    const local = cl.createContext();
    const program = local.createProgram("__kernel void k(__global int *x) { x[0] = 1; }");
    await program.build();
    const info = new BigUint64Array(1);
    /** A native reference count read through the raw binding (CL_*_REFERENCE_COUNT). */
    const kinds: [string, () => { unsafeHandle: unknown; retain(): unknown }, string, string, number, string][] = [
      ["buffer", () => local.createBuffer(64), "clRetainMemObject", "clGetMemObjectInfo", 0x1105, "clReleaseMemObject"],
      [
        "queue",
        () => local.createCommandQueue(),
        "clRetainCommandQueue",
        "clGetCommandQueueInfo",
        0x1092,
        "clReleaseCommandQueue",
      ],
      ["user event", () => local.createUserEvent(), "clRetainEvent", "clGetEventInfo", 0x11d2, "clReleaseEvent"],
      [
        "program",
        () => local.createProgram("__kernel void k() {}"),
        "clRetainProgram",
        "clGetProgramInfo",
        0x1160,
        "clReleaseProgram",
      ],
      ["kernel", () => program.createKernel("k"), "clRetainKernel", "clGetKernelInfo", 0x1192, "clReleaseKernel"],
    ];
    const call = (name: string, ...args: unknown[]) =>
      (symbols as unknown as Record<string, (...a: unknown[]) => number>)[name](...args);
    for (const [kind, make, retainFn, infoFn, refCount, releaseFn] of kinds) {
      let handle: unknown;
      (() => {
        const object = make();
        object.retain(); // two references the wrapper holds, then dropped without release()
        handle = object.unsafeHandle;
      })();
      assert.equal(call(retainFn, handle), 0, `${kind}: ${retainFn}`); // the test's own, to read the count
      const count = () => {
        assert.equal(call(infoFn, handle, refCount, 4, info, null), 0, `${kind}: ${infoFn}`);
        return Number(info[0] & 0xffffffffn);
      };
      await sleep(10); // the nursery registers survivors at the end of the turn
      for (let i = 0; i < 500 && count() > 1; i++) {
        gc();
        await sleep(10);
      }
      assert.equal(count(), 1, `${kind}: the references left besides the test's own`);
      assert.equal(call(releaseFn, handle), 0);
    }
    await until(() => local.liveObjects === 1);
    assert.equal(local.liveObjects, 1, "the program is the one child left");
    program.release();
    local.release();
  }, 60_000);
});

describe("library loading", () => {
  test("a missing library is a LibraryLoadError listing the paths tried and the packages", async () => {
    const result = await runScript(new URL("./fixtures/opencl-missing.ts", import.meta.url), [], {
      env: { OPENCL_LIBRARY: "/nonexistent/libOpenCL.so.1" },
      timeout: 30_000,
    });
    assert.equal(result.code, 0, result.stderr);
    const report = JSON.parse(result.stdout.trim().split("\n").pop()!);
    assert.equal(report.name, "LibraryLoadError");
    assert.deepEqual(report.tried, ["/nonexistent/libOpenCL.so.1"]);
    assert.match(report.message, /ocl-icd-libopencl1/);
    assert.ok(LibraryLoadError.prototype instanceof Error);
  });
});
