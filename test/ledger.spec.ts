/**
 * What every backend must do the same way: the memory ledger's rule (ffi/ledger.c, compiled by
 * Bun's TinyCC or loaded prebuilt by Deno and Node, and the JS fallback) and the conversion of a
 * `bool` callback's answer. And the prebuilt libraries are the ones the sources make.
 */
import { describe, test } from "vitest";
import { createHash } from "node:crypto";
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { Buffer } from "node:buffer";
import { assert, nolib, runtime, skip } from "./helpers.ts";
import { ledgerCases } from "./ledger-cases.ts";
import { backend } from "../src/backend.ts";
import { embreeCallbacks } from "../ffi/symbols/embree.ts";
import { embree } from "../src/embree/native.ts";
import { BUFFER_TYPE_VERTEX, FORMAT_FLOAT3, GEOMETRY_TYPE_TRIANGLE } from "../src/embree/native.ts";
import { jsLedger } from "../ffi/js-ledger.ts";
import { nativeLedgerPath, nativeLedgerSymbols, openNativeLedger } from "../ffi/native-ledger.ts";
import type { MemoryLedger } from "../ffi/types.ts";

let made: MemoryLedger | undefined;
/** The backend's ledger: one per process, and this process makes no Embree device. */
function backendLedger(): MemoryLedger {
  made ??= backend.memoryLedger(embreeCallbacks.memoryMonitor, () => true);
  return made;
}
let js: MemoryLedger | undefined;
/** The JS fallback, on Deno and Node, whose backends use it only where the prebuilt library is absent. */
function fallbackLedger(): MemoryLedger {
  js ??= jsLedger(backend.callback, embreeCallbacks.memoryMonitor, () => true);
  return js;
}

const implementations: [string, () => MemoryLedger][] = [
  [
    runtime === "bun" ? "native, ffi/bun-relay.c" : "the backend's, prebuilt ffi/ledger.c where it loads",
    backendLedger,
  ],
];
if (runtime !== "bun") implementations.push(["JS, ffi/js-ledger.ts", fallbackLedger]);

for (const [name, ledger] of implementations) {
  describe(`the memory ledger (${name})`, () => {
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
}

describe("the prebuilt ledger of Deno and Node (ffi/prebuilt/)", () => {
  const prebuilt = new URL("../ffi/prebuilt/", import.meta.url);
  const sourceHash = createHash("sha256")
    .update(readFileSync(new URL("../ffi/ledger.c", import.meta.url)))
    .update(readFileSync(new URL("../ffi/event-relay.c", import.meta.url)))
    .update(readFileSync(new URL("../ffi/deferred.c", import.meta.url)))
    .update(readFileSync(new URL("../ffi/lane.c", import.meta.url)))
    .update(readFileSync(new URL("memlife-ledger.c", prebuilt)))
    .digest("hex")
    .slice(0, 16);
  const libraries = readdirSync(prebuilt, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => join(decodeURIComponent(prebuilt.pathname), entry.name, "libmemlife-ledger.so"));

  test("every committed library was built from the sources in the tree (else: bash ffi/prebuilt/build.sh)", () => {
    if (nolib) skip("this pass runs from a copy of the tree without the libraries (test/all.ts, -nolib)");
    assert.ok(libraries.some((path) => path.includes("linux-x64")), libraries.join(", "));
    for (const path of libraries) {
      assert.ok(existsSync(path), `${path} is missing`);
      const bytes = readFileSync(path);
      assert.ok(
        bytes.includes(Buffer.from(sourceHash)),
        `${path} is stale: built from other sources than ${sourceHash}`,
      );
    }
  });

  test("the library for this platform loads and reports the same sources; an absent one falls back to JS", () => {
    if (process.platform !== "linux" || process.arch !== "x64") skip("the check loads the linux-x64 library");
    if (nolib) {
      // The library absent, as on a platform it is not built for: the backend keeps its accounts in JS.
      assert.equal(openNativeLedger(backend.open, nativeLedgerPath("linux-x64")), null);
      assert.equal(backendLedger().settlesNatively, false, "the backend took the JS ledger");
      return;
    }
    const lib = openNativeLedger(backend.open, nativeLedgerPath("linux-x64"));
    assert.notEqual(lib, null);
    assert.deepEqual(Object.keys(lib!.symbols).sort(), Object.keys(nativeLedgerSymbols).sort());
    assert.equal(backend.readCString(lib!.symbols.ledger_source_hash()), sourceHash);
    assert.equal(openNativeLedger(backend.open, nativeLedgerPath("plan9-mips")), null);
    assert.equal(openNativeLedger(backend.open, null), null);
    if (runtime !== "bun") assert.equal(backendLedger().settlesNatively, true, "the backend took the prebuilt ledger");
  });

  test("build.sh builds the library from the sources (needs a C compiler)", () => {
    let cc = true;
    try {
      execFileSync("cc", ["--version"], { stdio: "ignore" });
    } catch {
      cc = false;
    }
    if (!cc) skip("no C compiler (cc): apt-get install gcc libc6-dev");
    const out = mkdtempSync(join(tmpdir(), "memlife-ledger-"));
    try {
      const script = decodeURIComponent(new URL("build.sh", prebuilt).pathname);
      execFileSync("bash", [script], { env: { ...process.env, OUT: out }, stdio: "pipe" });
      const built = readFileSync(join(out, "linux-x64", "libmemlife-ledger.so"));
      assert.ok(built.includes(Buffer.from(sourceHash)));
      const lib = openNativeLedger(backend.open, join(out, "linux-x64", "libmemlife-ledger.so"));
      assert.equal(backend.readCString(lib!.symbols.ledger_source_hash()), sourceHash);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
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
