/**
 * What every backend must do the same way: the memory ledger's rule (Bun's in C, Deno's and
 * Node's in JS) and the conversion of a `bool` callback's answer.
 */
import { describe, test } from "vitest";
import { assert, runtime } from "./helpers.ts";
import { ledgerCases } from "./ledger-cases.ts";
import { backend } from "../src/backend.ts";
import { embreeCallbacks } from "../ffi/symbols/embree.ts";
import { embree } from "../src/embree/native.ts";
import { BUFFER_TYPE_VERTEX, FORMAT_FLOAT3, GEOMETRY_TYPE_TRIANGLE } from "../src/embree/native.ts";
import type { MemoryLedger } from "../ffi/types.ts";

let made: MemoryLedger | undefined;
/** One ledger for the file: Bun allows one per process, and this process makes no Embree device. */
function ledger(): MemoryLedger {
  made ??= backend.memoryLedger(embreeCallbacks.memoryMonitor, () => true);
  return made;
}

describe(`the memory ledger (${runtime === "bun" ? "native, ffi/bun-relay.c" : "JS, ffi/js-ledger.ts"})`, () => {
  ledgerCases.forEach((c, index) => {
    test(c.name, () => {
      const l = ledger();
      const id = 100 + index;
      l.reset(id);
      l.setBudget(id, c.budget);
      c.calls.forEach(([bytes, post, answer, verdict], i) => {
        assert.equal(l.apply(id, bytes, post, answer), verdict, `call ${i}: apply(${bytes}, ${post}, ${answer})`);
      });
      assert.deepEqual(l.read(id), { ...c.figures, native: 0 });
    });
  });

  test("reset empties an account and lifts its budget (ids are reused)", () => {
    const l = ledger();
    l.reset(7);
    l.setBudget(7, 10);
    assert.equal(l.apply(7, 100, false, true), 1);
    l.reset(7);
    assert.equal(l.apply(7, 100, false, true), 0);
    assert.equal(l.read(7).bytes, 100);
    assert.equal(l.read(7).budgetDenied, 0);
  });

  test("an id never reset has no account: the answer decides, nothing is counted", () => {
    const l = ledger();
    assert.equal(l.apply(5000, 100, false, true), 0);
    assert.equal(l.apply(5000, 100, false, false), 2);
    assert.deepEqual(l.read(5000), {
      bytes: 0,
      peak: 0,
      calls: 0,
      denied: 0,
      budgetDenied: 0,
      native: 0,
      lastRefused: 0,
      lastRefusedLive: 0,
    });
  });
});

test("a bool callback's answer converts as C would, on every backend: falsy (undefined included) refuses", () => {
  const lib = embree().symbols;
  let answer: unknown = true;
  const monitor = backend.callback(embreeCallbacks.memoryMonitor, () => answer);
  const device = lib.rtcNewDevice("threads=1");
  assert.notEqual(device, null);
  const geometry = lib.rtcNewGeometry(device, GEOMETRY_TYPE_TRIANGLE);
  lib.rtcSetDeviceMemoryMonitorFunction(device, monitor, 0);
  const verdicts: Record<string, boolean> = {};
  try {
    for (
      const [label, value] of [
        ["undefined", undefined],
        ["false", false],
        ["0", 0],
        ['""', ""],
        ["null", null],
        ["true", true],
        ["1", 1],
        ['"no"', "no"],
        ["{}", {}],
      ] as const
    ) {
      answer = value;
      const memory = lib.rtcSetNewGeometryBuffer(geometry, BUFFER_TYPE_VERTEX, 0, FORMAT_FLOAT3, 12, 3);
      answer = true;
      lib.rtcGetDeviceError(device); // clears the error a refusal raised
      verdicts[label] = memory !== null;
    }
  } finally {
    answer = true;
    lib.rtcReleaseGeometry(geometry);
    lib.rtcSetDeviceMemoryMonitorFunction(device, null, 0);
    lib.rtcReleaseDevice(device);
  }
  assert.deepEqual(verdicts, {
    undefined: false,
    false: false,
    0: false,
    '""': false,
    null: false,
    true: true,
    1: true,
    '"no"': true,
    "{}": true,
  });
});
