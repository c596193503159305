/**
 * The FinalizationRegistry safety net (src/callbacks.ts, SafetyNet) with its fixed-size nursery:
 * what is still alive when a nursery fills or a turn ends is registered with the value it was added
 * with (or its [finalizerState]), what was released first never is, over several fillings.
 */
import { describe, test } from "vitest";
import { assert, gc, sleep } from "./helpers.ts";
import { finalizerState, inRegistry, SafetyNet } from "../src/callbacks.ts";

class Thing {
  alive = true;
  [inRegistry] = false;
  readonly id: number;
  constructor(id: number) {
    this.id = id;
  }
  [finalizerState](): string | undefined {
    return this.alive ? `state ${this.id}` : undefined;
  }
}

/** Collects until `done()` or gives up after ~10 s: finalizers run from the event loop, later. */
async function collectUntil(done: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !done(); i++) {
    gc();
    await sleep(10);
  }
}

describe("SafetyNet", () => {
  test("registers what is alive after the nursery filled or the turn ended, with its own held value, and nothing released", async () => {
    const finalized: string[] = [];
    const net = new SafetyNet<string>((held) => finalized.push(held));
    const expected = new Set<string>();
    // 700 objects: the 256-slot nursery fills twice within the turn, the rest waits for the timer.
    // Every third one is released (and removed) before it could be registered; every fifth one
    // has an explicit held value, the others give theirs through [finalizerState].
    (() => {
      for (let i = 0; i < 700; i++) {
        const thing = new Thing(i);
        const explicit = i % 5 === 0;
        net.add(thing, explicit ? `held ${i}` : undefined);
        if (i % 3 === 0) {
          thing.alive = false;
          net.remove(thing);
        } else {
          expected.add(explicit ? `held ${i}` : `state ${i}`);
        }
      }
    })();
    await sleep(5); // the end-of-turn promotion of the last 188
    await collectUntil(() => finalized.length >= expected.size);
    assert.equal(finalized.length, expected.size);
    assert.deepEqual(new Set(finalized), expected);
  });

  test("an object released while it is the last one added leaves the nursery at once, its held value with it; one released out of order is skipped at promotion", async () => {
    const finalized: string[] = [];
    const net = new SafetyNet<string>((held) => finalized.push(held));
    (() => {
      const a = new Thing(1);
      net.add(a);
      const b = new Thing(2);
      net.add(b, "held 2");
      const c = new Thing(3);
      net.add(c, "held 3");
      b.alive = false;
      net.remove(b); // not the last one added: stays until promotion, which skips it
      c.alive = false;
      net.remove(c); // the last one: its slot and held value are free again
      const d = new Thing(4);
      net.add(d); // takes c's slot: must finalize with its own state, not "held 3"
      // 600 more create + release pairs: the nursery never fills, nothing of theirs is registered.
      for (let i = 0; i < 600; i++) {
        const t = new Thing(100 + i);
        net.add(t, i % 2 === 0 ? `held ${100 + i}` : undefined);
        t.alive = false;
        net.remove(t);
      }
      const e = new Thing(5);
      net.add(e);
    })();
    await sleep(5);
    await collectUntil(() => finalized.length >= 3);
    await sleep(20);
    assert.deepEqual(finalized.sort(), ["state 1", "state 4", "state 5"]);
  });

  test("an object released after it was registered is unregistered and never finalized", async () => {
    const finalized: string[] = [];
    const net = new SafetyNet<string>((held) => finalized.push(held));
    const kept: Thing[] = [];
    (() => {
      for (let i = 0; i < 10; i++) {
        const thing = new Thing(i);
        net.add(thing);
        kept.push(thing);
      }
    })();
    await sleep(5); // registered now
    assert.ok(kept.every((t) => t[inRegistry]));
    for (const thing of kept.slice(0, 5)) {
      thing.alive = false;
      net.remove(thing);
    }
    kept.length = 0;
    await collectUntil(() => finalized.length >= 5);
    await sleep(20);
    assert.deepEqual(finalized.sort(), ["state 5", "state 6", "state 7", "state 8", "state 9"]);
  });
});

describe("objects the program froze", () => {
  test("frozen before registration: left out of the net, the rest of the batch registered, no uncaught error", async () => {
    const finalized: string[] = [];
    const net = new SafetyNet<string>((held) => finalized.push(held));
    (() => {
      for (let i = 0; i < 10; i++) {
        const thing = new Thing(i);
        net.add(thing);
        if (i === 3) Object.freeze(thing);
      }
    })();
    await sleep(5); // the turn ends: the nursery is promoted (it threw at the frozen one before)
    await collectUntil(() => finalized.length >= 9);
    assert.equal(finalized.length, 9);
    assert.ok(!finalized.includes("state 3"), "a frozen object could never be unregistered: it stays out");
  });

  test("frozen after registration: release() unregisters it all the same, the finalizer never runs for it", async () => {
    const finalized: string[] = [];
    const net = new SafetyNet<string>((held) => finalized.push(held));
    let kept: Thing | undefined = new Thing(1);
    net.add(kept);
    await sleep(5); // registered now
    assert.equal(kept[inRegistry], true);
    Object.freeze(kept);
    net.remove(kept); // threw before (the flag's assignment), after the program's release had begun
    kept = undefined;
    for (let i = 0; i < 30 && finalized.length === 0; i++) {
      gc();
      await sleep(10);
    }
    assert.deepEqual(finalized, []);
  });
});
