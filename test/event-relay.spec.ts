/**
 * `event` callbacks (OpenCL's destructor, SVM free and event status callbacks) called from native
 * threads, as NVIDIA's driver calls all of them: the calling thread must go on without waiting for
 * the JS thread (Bun's event relay slots, ffi/bun-relay.c; the prebuilt ffi/event-relay.c on Deno
 * and Node), and every call must still reach JS once, whole, in each thread's order. On the JS
 * thread the callback runs before the native call returns: inside it, or on Bun and Node right
 * after it (ffi/deferred.c). test/native/callers.c plays the driver; it is
 * compiled here, and every test skips without a C compiler.
 */
import { afterAll, describe, test } from "vitest";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { assert, buildShim, openclLoader, runScript, runtime, skip } from "./helpers.ts";
import { backend } from "../src/backend.ts";
import * as ffi from "#ffi";
import { openclCallbacks } from "../ffi/symbols/opencl.ts";
import type { Pointer, SymbolTable } from "../ffi/types.ts";

const table = {
  callers_start: { args: ["fn", "fn", "i32", "i32"], returns: "i32" },
  callers_finished: { args: [], returns: "i32" },
  callers_join: { args: [], returns: "void", blocking: true },
  call_now: { args: ["fn", "ptr", "i32", "usize"], returns: "void", reentrant: true },
  call_many: { args: ["fn", "i32", "i32"], returns: "void", reentrant: true },
} as const satisfies SymbolTable;

/** The helper library, or why it cannot be built here. */
function build(): { path: string; dir: string } | { skip: string } {
  const dir = mkdtempSync(join(tmpdir(), "memlife-callers-"));
  const path = join(dir, "libcallers.so");
  const source = fileURLToPath(new URL("./native/callers.c", import.meta.url));
  const r = spawnSync("cc", ["-O2", "-fPIC", "-shared", "-pthread", "-o", path, source], { encoding: "utf8" });
  if (r.error !== undefined || r.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    return { skip: `no C compiler to build test/native/callers.c (${r.error?.message ?? r.stderr.trim()})` };
  }
  return { path, dir };
}

/** Calls relayed off other threads so far: Bun's relay, or Deno's and Node's prebuilt one. */
function relayedSoFar(): number | null {
  const m = ffi as {
    bunRelayStats?: () => { relayed: number };
    eventRelayCounts?: () => { queued: number; fallback: number } | null;
  };
  if (m.bunRelayStats !== undefined) return m.bunRelayStats().relayed;
  return m.eventRelayCounts?.()?.queued ?? null;
}

/** Bun: whether a non-burst event call's thread waits until JS ran it (8 CPUs or more). */
const bunCallersWait = (ffi as { eventCallersWait?: boolean }).eventCallersWait === true;

type Call = [object: bigint, status: number, id: number];

describe("event callbacks from native threads", () => {
  const built = build();
  const lib = "skip" in built ? null : backend.open(built.path, table).symbols;
  const calls: Call[] = [];
  let throwFor = -1;
  const record = ((object: Pointer | null, status: number, id: number) => {
    calls.push([backend.address(object), status, id]);
    if (id === throwFor) throw new Error("a callback that throws");
  }) as (...args: never[]) => unknown;
  const notify = backend.callback(openclCallbacks.eventStatus, record);
  // The same signature as a burst callback (an SVM free's delivery): its callers never wait.
  const burst = backend.callback({ ...openclCallbacks.eventStatus, burst: true }, record);

  async function until(condition: () => boolean, what: string): Promise<void> {
    const deadline = Date.now() + 10_000;
    while (!condition()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  test("on the JS thread the callback runs inside the native call, with its arguments whole", () => {
    if (lib === null) skip((built as { skip: string }).skip);
    calls.length = 0;
    // The last argument is a `user_data` id (ffi/types.ts `id`): below 2^32, all 32 bits of it.
    lib.call_now(notify, backend.fromAddress(0x7fff_1234_5678n), -7, 2 ** 32 - 3);
    assert.deepEqual(calls, [[0x7fff_1234_5678n, -7, 2 ** 32 - 3]]);
  });

  test("5000 calls on the JS thread inside one native call all run before it returns, whole and in order", () => {
    if (lib === null) skip((built as { skip: string }).skip);
    // PoCL calls a failed user event's commands' callbacks so, inside clSetUserEventStatus. Bun and
    // Node queue them in C and run them as the call returns (ffi/deferred.c): the queue starts at
    // 64 and grows.
    calls.length = 0;
    lib.call_many(notify, 0, 5000);
    assert.equal(calls.length, 5000);
    calls.forEach(([object, status, id], i) => {
      assert.equal(id, i, `call ${i} came in place ${i}`);
      assert.equal(object, BigInt(0x1000 + i));
      assert.equal(status, -i - 1);
    });
  });

  test("a callback that makes such a call itself: that call's callbacks run before it returns, the rest after, in order", () => {
    if (lib === null) skip((built as { skip: string }).skip);
    const seen: (number | string)[] = [];
    let depth = 0;
    const nested = backend.callback(
      openclCallbacks.eventStatus,
      ((_object: unknown, _status: number, id: number) => {
        seen.push(id);
        if (id === 1 || id === 101) {
          depth++;
          lib!.call_many(nested, id * 100, 3);
          depth--;
          seen.push(`after ${id}`);
        }
      }) as (...args: never[]) => unknown,
    );
    lib.call_many(nested, 0, 4);
    assert.equal(depth, 0);
    assert.deepEqual(seen, [
      0,
      1,
      100,
      101,
      10100,
      10101,
      10102,
      "after 101",
      102,
      "after 1",
      2,
      3,
    ]);
  });

  test("Bun, Node: one of them that throws does not stop the others, and the call throws its exception after them", () => {
    if (lib === null) skip((built as { skip: string }).skip);
    // memlife's own callbacks never throw into the backend (their trampolines catch); what a bare
    // runtime callback does with an exception differs by runtime, so this is the deferred calls'
    // queue alone (ffi/deferred.c): Bun's, and Node's where the prebuilt library is.
    if (runtime === "deno") skip("Deno enters each callback in the call (its own callbacks, ffi/deno.ts says why)");
    if (runtime === "node" && relayedSoFar() === null) skip("no prebuilt library here: no deferred calls");
    calls.length = 0;
    throwFor = 3;
    try {
      assert.throws(() => lib.call_many(notify, 0, 10), /a callback that throws/);
    } finally {
      throwFor = -1;
    }
    assert.deepEqual(calls.map((c) => c[2]), Array.from({ length: 10 }, (_, i) => i));
    // Nothing stays queued: the next call's callbacks are its own.
    calls.length = 0;
    lib.call_many(notify, 50, 2);
    assert.deepEqual(calls.map((c) => c[2]), [50, 51]);
  });

  /**
   * 8 threads x 500 calls while the JS thread is busy, the even ones calling `even` and the odd
   * ones `odd`: `goOn` of them must finish meanwhile; then every call must reach JS once, whole,
   * in its thread's order, `relayed` of them through the event relay of Deno and Node.
   */
  async function threadsCalling(even: unknown, odd: unknown, goOn: number, relayed: number | null): Promise<void> {
    calls.length = 0;
    const before = relayedSoFar();
    const threads = 8, each = 500;
    assert.equal(lib!.callers_start(even, odd, threads, each), threads);
    // The JS thread stays busy here, so no callback can run: a thread that waits for JS cannot finish.
    const deadline = Date.now() + 10_000;
    while (lib!.callers_finished() < goOn && Date.now() < deadline);
    const finished = lib!.callers_finished();
    assert.ok(
      finished >= goOn,
      `${finished} of ${threads} native threads went on while the JS thread was busy, not ${goOn}`,
    );
    assert.equal(calls.length, 0, "no callback ran while the JS thread was busy");
    await until(() => calls.length >= threads * each, `${threads * each} callbacks`);
    await lib!.callers_join();
    assert.equal(calls.length, threads * each);
    const next = new Array<number>(threads).fill(0);
    for (const [object, status, id] of calls) {
      const t = Math.floor(id / 100000), i = id % 100000;
      assert.equal(i, next[t], `thread ${t}: call ${i} came after call ${next[t] - 1}`);
      next[t]++;
      assert.equal(object, BigInt(0x10000 * (t + 1) + i), `the object pointer of call ${id}`);
      assert.equal(status, -id - 1, `the status of call ${id}`);
    }
    if (relayed !== null) assert.equal(relayedSoFar()! - before!, relayed, "calls relayed off the threads");
  }

  test("of threads calling at once, at most one waits for a busy JS thread (Node, Bun)", async () => {
    if (lib === null) skip((built as { skip: string }).skip);
    // Bun's relay lets every thread go on, or with 8 CPUs or more parks each until JS ran its call
    // (ffi/bun.ts, eventCallersWait, says why); Node's (ffi/event-relay.c) has one thread wait while
    // JS takes the queue (before the relay, all 8 waited); Deno keeps its own callbacks here, each
    // thread waiting for its calls (ffi/deno.ts says why).
    const relayed = runtime === "node" && relayedSoFar() !== null;
    const goOn = runtime === "bun" ? (bunCallersWait ? 0 : 8) : relayed ? 7 : 0;
    await threadsCalling(notify, notify, goOn, relayed ? 4000 : null);
  });

  test("a burst callback's callers never wait for the JS thread", async () => {
    if (lib === null) skip((built as { skip: string }).skip);
    const relayed = runtime !== "bun" && relayedSoFar() !== null;
    if (runtime !== "bun" && !relayed) skip("no prebuilt library here: every caller waits");
    await threadsCalling(burst, burst, 8, relayed ? 4000 : null);
  });

  test("burst and other callbacks from threads calling at once share the relay without losing a call", async () => {
    if (lib === null) skip((built as { skip: string }).skip);
    if (runtime !== "bun" && relayedSoFar() === null) skip("no prebuilt library here: every caller waits");
    // Deno relays only the burst callers (2000 calls); Node relays all, and of its 4 others one waits.
    const goOn = runtime === "bun" ? (bunCallersWait ? 4 : 8) : runtime === "node" ? 7 : 4;
    await threadsCalling(burst, notify, goOn, runtime === "bun" ? null : runtime === "node" ? 4000 : 2000);
  });

  test("a callback that throws does not stop the calls queued after it", async () => {
    if (lib === null) skip((built as { skip: string }).skip);
    // Bun's own queue delivers each call on its own; the relays of Deno and Node batch them. (A
    // runtime's own callback that throws on a foreign thread: Deno logs "Illegal unhandled
    // exception in nonblocking callback"; memlife's core never lets a user's exception reach it.)
    if (runtime === "bun") skip("Bun delivers each relayed call as a task of its own");
    if (relayedSoFar() === null) skip("no prebuilt library here: no batching relay");
    calls.length = 0;
    throwFor = 3;
    try {
      // The burst slot: its calls pile up in the queue and are taken in one batch.
      assert.equal(lib.callers_start(burst, burst, 1, 50), 1);
      await until(() => calls.length >= 50, "50 callbacks");
      await lib.callers_join();
      assert.deepEqual(calls.map((c) => c[2]), Array.from({ length: 50 }, (_, i) => i));
    } finally {
      throwFor = -1;
    }
  });

  afterAll(() => {
    if (!("skip" in built)) rmSync(built.dir, { recursive: true, force: true });
  });
});

describe("destructor callbacks from a driver thread (test/native/thread-driver.c, as NVIDIA calls them)", () => {
  const driver = buildShim("thread-driver", openclLoader());
  afterAll(() => {
    if ("cleanup" in driver) driver.cleanup();
  });

  test(
    "released back to back, each arrives once and the driver thread waits for few round trips; awaited one at a time, its caller delivers it",
    async () => {
      if ("skip" in driver) return skip(driver.skip);
      const n = 2000;
      const r = await runScript(new URL("./fixtures/driver-thread-destructors.ts", import.meta.url), [String(n)], {
        // Each call 0.3 ms after its release: the awaited ones come when the program awaits them.
        env: { OPENCL_LIBRARY: driver.path, MEMLIFE_DRIVER_DELAY_US: "300" },
        timeout: 60_000,
      });
      assert.equal(r.code, 0, `the fixture failed: ${r.stderr}`);
      type Counts = { queued: number; deliveries: number; several: number };
      const out = JSON.parse(r.stdout.trim().split("\n").pop()!) as {
        once: boolean;
        awaited: number;
        fromDriverThread: number;
        backToBack: Counts | null;
        oneByOne: Counts | null;
      };
      assert.ok(
        out.fromDriverThread >= n,
        `the driver thread made ${out.fromDriverThread} calls: the shim was not used`,
      );
      assert.ok(out.once, "every destructor callback ran once");
      assert.equal(out.awaited, 50);
      // Bun's threadsafe callbacks never make the driver thread wait; Deno keeps its own callbacks
      // for destructors, each a round trip (ffi/deno.ts says why), and has no relay slot for them.
      const counts = out.backToBack;
      if (counts === null) return;
      // A call the driver thread delivers itself is a round trip to the JS thread that it waits for:
      // one per callback took 50 us a buffer on a 2-core VM, where a wake-up costs 47 us. While the
      // program awaits several, the caller goes on and the relay thread takes the calls.
      assert.ok(
        counts.several >= n / 2,
        `${counts.several} of ${n} calls left to the relay thread: ${JSON.stringify(counts)}`,
      );
      // Awaited one at a time, the program awaits one callback: its caller delivers it, the lowest latency.
      assert.equal(out.oneByOne!.several, counts.several, `awaited one at a time: ${JSON.stringify(out.oneByOne)}`);
    },
    70_000,
  );
});
