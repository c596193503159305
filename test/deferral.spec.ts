/**
 * ffi/deferred.ts alone: the JS side of the deferred calls, over a queue written here as
 * ffi/deferred.c writes it (14 words a call: 6 arguments of two words, the slot, a pad). What the
 * edge of the stack does to a run is played by a pointer reader that throws RangeError, as Node's
 * does there (it makes a bigint).
 */
import { describe, test } from "vitest";
import { assert } from "./helpers.ts";
import { Deferral } from "../ffi/deferred.ts";

const WORDS = 14;
const SLOT = 12;

/** While true, queueing a microtask throws RangeError, as at the edge of the stack. */
let microtasksRefused = false;

/** A Deferral over a JS queue; `push` queues a call as deferred_push does. */
function deferral(readPointer: (low: number, high: number) => unknown) {
  const state = new Int32Array(3);
  const memory = new Uint32Array(64 * WORDS);
  state[2] = 64;
  const made = new Deferral(state, (byteLength) => memory.subarray(0, byteLength / 4), readPointer, (fn) => {
    if (microtasksRefused) throw new RangeError("Maximum call stack size exceeded");
    queueMicrotask(fn);
  });
  const push = (slot: number, ...args: number[]) => {
    const at = state[0] * WORDS;
    args.forEach((a, i) => (memory[at + 2 * i] = a));
    memory[at + SLOT] = slot;
    state[0]++;
  };
  return { made, state, push };
}

/** A pointer reader that throws RangeError the first time it reads `low`, as at the edge of the stack. */
function refusingOnce(refused: number): (low: number, high: number) => unknown {
  let refuse = 1;
  return (low) => {
    if (low === refused && refuse-- > 0) throw new RangeError("Maximum call stack size exceeded");
    return low;
  };
}

const microtask = () => new Promise<void>((resolve) => queueMicrotask(resolve));

describe("Deferral (ffi/deferred.ts), the edge of the stack", () => {
  test("a call whose arguments cannot be read is not lost: the run returns, and it and the rest run on a microtask, in order, once", async () => {
    const { made, state, push } = deferral(refusingOnce(2));
    const ran: unknown[] = [];
    made.slot(0, ["ptr", "usize"], (p, id) => void ran.push([p, id]));
    push(0, 1, 10);
    push(0, 2, 20);
    push(0, 3, 30);
    made.run(0);
    assert.deepEqual(ran, [[1, 10]], "the run went past the call it could not read, or lost it");
    assert.equal(state[0], 3, "the calls left are still queued");
    // A later call (a binding runs from the count it found) runs its own calls only: one lost to the
    // stack there would be another call's, which returned.
    const mine = state[0];
    push(0, 5, 50);
    made.run(mine);
    assert.deepEqual(ran, [[1, 10], [5, 50]]);
    await microtask();
    await microtask();
    assert.deepEqual(ran, [[1, 10], [5, 50], [2, 20], [3, 30]]);
    assert.equal(state[0], 0);
    assert.equal(state[1], 0);
  });

  test("where not even a microtask can be queued, the run throws, and the next run that ends queues it for what was left", async () => {
    const { made, state, push } = deferral(refusingOnce(2));
    const ran: unknown[] = [];
    made.slot(0, ["ptr"], (p) => void ran.push(p));
    push(0, 1);
    push(0, 2);
    microtasksRefused = true;
    try {
      assert.throws(() => made.run(0), RangeError);
    } finally {
      microtasksRefused = false;
    }
    assert.deepEqual(ran, [1]);
    await microtask();
    assert.deepEqual(ran, [1], "nothing was queued to run it");
    const mine = state[0];
    push(0, 4);
    made.run(mine);
    assert.deepEqual(ran, [1, 4]);
    await microtask();
    await microtask();
    assert.deepEqual(ran, [1, 4, 2]);
    assert.equal(state[0], 0);
  });

  test("a run stopped inside a callback stops the run it is in: nothing left runs at that depth, all of it on the microtask, in queue order", async () => {
    const { made, state, push } = deferral(refusingOnce(2));
    const ran: unknown[] = [];
    made.slot(0, ["ptr"], (p) => void ran.push(p));
    // Slot 1: a callback that makes a deferring call of its own, which queues 2 and 3.
    made.slot(1, [], () => {
      const mine = state[0];
      push(0, 2);
      push(0, 3);
      made.run(mine);
    });
    push(1);
    push(0, 7);
    made.run(0);
    assert.deepEqual(ran, [], "calls ran at the depth where a run had stopped");
    await microtask();
    await microtask();
    assert.deepEqual(ran, [7, 2, 3]);
    assert.equal(state[0], 0);
    assert.equal(state[1], 0);
  });

  test("a call that throws once entered is not run again, and does not stop the others: the run throws its exception after them", () => {
    const { made, state, push } = deferral((low) => low);
    const ran: number[] = [];
    made.slot(0, ["ptr"], (p) => {
      ran.push(p as number);
      if (p === 2) throw new RangeError("inside");
    });
    push(0, 1);
    push(0, 2);
    push(0, 3);
    assert.throws(() => made.run(0), /inside/);
    assert.deepEqual(ran, [1, 2, 3]);
    assert.equal(state[0], 0);
    made.run(0);
    assert.deepEqual(ran, [1, 2, 3]);
  });
});
