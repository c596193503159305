/**
 * The FinalizationRegistry safety net (src/callbacks.ts, SafetyNet) with its fixed-size nursery:
 * what is still alive when a nursery fills or a turn ends is registered with the state its class
 * gives, what was released first never is, over several fillings. The net keeps nothing on the
 * objects: what a program writes on one, or freezing it, changes nothing.
 */
import { describe, test } from "vitest";
import { assert, gc, sleep } from "./helpers.ts";
import { SafetyNet } from "../src/callbacks.ts";

class Thing {
  #alive = true;
  readonly id: number;
  constructor(id: number) {
    this.id = id;
  }
  release(): void {
    this.#alive = false;
  }
  /** What the net asks, as memlife's classes' static [finalizerState]: from the private field. */
  static state(thing: Thing): string | undefined {
    return thing.#alive ? `state ${thing.id}` : undefined;
  }
}

function netOf(finalized: string[]): SafetyNet<string, Thing> {
  return new SafetyNet<string, Thing>((held) => finalized.push(held), (thing) => Thing.state(thing));
}

/** Collects until `done()` or gives up after ~10 s: finalizers run from the event loop, later. */
async function collectUntil(done: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !done(); i++) {
    gc();
    await sleep(10);
  }
}

/** `n` things added to `net` and registered (the turn ended): the caller holds the only references. */
async function registeredThings(net: SafetyNet<string, Thing>, n: number): Promise<Thing[]> {
  const kept: Thing[] = [];
  // In a function of its own: an async function's frame may keep the last `thing` alive.
  (() => {
    for (let i = 0; i < n; i++) {
      const thing = new Thing(i);
      net.add(thing);
      kept.push(thing);
    }
  })();
  await sleep(5);
  return kept;
}

/** Collects a while and expects nothing more finalized than `expected`. */
async function settle(finalized: string[], expected: string[]): Promise<void> {
  await collectUntil(() => finalized.length >= expected.length);
  for (let i = 0; i < 5; i++) {
    gc();
    await sleep(10);
  }
  assert.deepEqual(finalized.sort(), expected.sort());
}

describe("SafetyNet", () => {
  test("registers what is alive after the nursery filled or the turn ended, with its state, and nothing released", async () => {
    const finalized: string[] = [];
    const net = netOf(finalized);
    const expected: string[] = [];
    // 700 objects: the 256-slot nursery fills twice within the turn, the rest waits for the timer.
    // Every third one is released (and removed) before it could be registered.
    (() => {
      for (let i = 0; i < 700; i++) {
        const thing = new Thing(i);
        net.add(thing);
        if (i % 3 === 0) {
          thing.release();
          net.remove(thing);
        } else expected.push(`state ${i}`);
      }
    })();
    await sleep(5); // the end-of-turn promotion of the last 188
    await settle(finalized, expected);
  });

  test("an object released while it is the last one added leaves the nursery at once; one released out of order is skipped at promotion", async () => {
    const finalized: string[] = [];
    const net = netOf(finalized);
    (() => {
      const a = new Thing(1);
      net.add(a);
      const b = new Thing(2);
      net.add(b);
      const c = new Thing(3);
      net.add(c);
      b.release();
      net.remove(b); // not the last one added: stays until promotion, which skips it
      c.release();
      net.remove(c); // the last one: its slot is free again
      const d = new Thing(4);
      net.add(d); // takes c's slot
      // 600 more create + release pairs: the nursery never fills, nothing of theirs is registered.
      for (let i = 0; i < 600; i++) {
        const t = new Thing(100 + i);
        net.add(t);
        t.release();
        net.remove(t);
      }
      const e = new Thing(5);
      net.add(e);
    })();
    await sleep(5);
    await settle(finalized, ["state 1", "state 4", "state 5"]);
  });

  test("an object released after it was registered is unregistered and never finalized", async () => {
    const finalized: string[] = [];
    const net = netOf(finalized);
    const kept = await registeredThings(net, 10);
    // In creation order: none but the last is the nursery's last, and the nursery is empty anyway.
    for (const thing of kept.slice(0, 5)) {
      thing.release();
      net.remove(thing);
    }
    kept.length = 0;
    await settle(finalized, ["state 5", "state 6", "state 7", "state 8", "state 9"]);
  });

  test("renew registers anew with the state the object gives now; in the nursery it changes nothing", async () => {
    const finalized: string[] = [];
    const net = new SafetyNet<string, { n: number }>((held) => finalized.push(held), (o) => `refs ${o.n}`);
    (() => {
      const registered = { n: 1 };
      net.add(registered);
      const young = { n: 1 };
      (globalThis as { keep?: unknown }).keep = registered;
      setTimeout(() => {
        registered.n = 2;
        net.renew(registered);
        (globalThis as { keep?: unknown }).keep = undefined;
      }, 5);
      net.add(young);
      young.n = 3;
      net.renew(young); // not registered: asked at promotion anyway
    })();
    await sleep(20);
    await settle(finalized, ["refs 2", "refs 3"]);
  });
});

describe("an object added again", () => {
  test("added twice before a promotion (an SVM free that did not happen gives its allocation back): registered once, finalized once", async () => {
    const finalized: string[] = [];
    const net = netOf(finalized);
    (() => {
      const a = new Thing(1);
      net.add(a);
      const b = new Thing(2);
      net.add(b);
      net.remove(a); // taken by a free command: not the last one added, so still in the nursery
      net.add(a); // the command was refused: the allocation is the program's again
    })();
    await sleep(5);
    await settle(finalized, ["state 1", "state 2"]);
  });
});

describe("what the program does to an object", () => {
  test("frozen before registration: registered all the same, and finalized", async () => {
    const finalized: string[] = [];
    const net = netOf(finalized);
    (() => {
      for (let i = 0; i < 10; i++) {
        const thing = new Thing(i);
        net.add(thing);
        if (i === 3) Object.freeze(thing);
      }
    })();
    await sleep(5);
    await settle(finalized, Array.from({ length: 10 }, (_, i) => `state ${i}`));
  });

  test("frozen after registration: release() unregisters it all the same, the finalizer never runs for it", async () => {
    const finalized: string[] = [];
    const net = netOf(finalized);
    let kept: Thing | undefined = new Thing(1);
    net.add(kept);
    await sleep(5); // registered now
    Object.freeze(kept);
    kept.release();
    net.remove(kept);
    kept = undefined;
    await settle(finalized, []);
  });

  test("own properties of any key, another prototype: the object is registered and unregistered as any other", async () => {
    const finalized: string[] = [];
    const net = netOf(finalized);
    let kept = await registeredThings(net, 4);
    // In a function of its own: an async function's frame may keep the last `thing` alive.
    (() => {
      for (const thing of kept) {
        for (const key of [Symbol("memlife.inRegistry"), "alive", "registered"]) {
          Object.defineProperty(thing, key, { value: false, writable: true, configurable: true });
        }
        Object.setPrototypeOf(thing, null);
      }
      for (const thing of kept.slice(0, 2)) {
        Thing.prototype.release.call(thing);
        net.remove(thing);
      }
    })();
    kept = [];
    await settle(finalized, ["state 2", "state 3"]);
  });
});
