/**
 * Bad input never reaches C (design, semantics 6 and 8): every option of every public call with
 * wrong types and out-of-range values, each refused with TypeError or RangeError before any native
 * call; use after release and double release of every kind of object; parents released before
 * their children; memory native code keeps that is resizable or detached.
 */
import { afterAll as after, describe, test } from "vitest";
import { assert, runScript, skip, sleep } from "./helpers.ts";
import { cl, onCallbackError, OpenCLError, ReleasedError, rtc } from "../src/mod.ts";
import { backend } from "../src/backend.ts";
import { embree } from "../src/embree/native.ts";
import { monitorDiagnostics } from "../src/embree/diagnostics.ts";

// Every native call of both libraries goes through these counters, so that a test can tell that
// a refusal happened before any of them. Installed before anything caches a symbol.
let nativeCalls = 0;
function count(table: Record<string, unknown>): void {
  for (const name of Object.keys(table)) {
    const fn = table[name];
    if (typeof fn === "function") table[name] = (...args: unknown[]) => (nativeCalls++, fn(...args));
  }
}
count(cl.library().symbols as unknown as Record<string, unknown>);
count(cl.library().async as unknown as Record<string, unknown>);
count(embree().symbols as unknown as Record<string, unknown>);
count(embree().async as unknown as Record<string, unknown>);

const ctx = cl.createContext();
const device = ctx.devices[0];
const queue = ctx.createCommandQueue();
const buf = ctx.createBuffer(4096);
const rtcDevice = rtc.newDevice("threads=1");
after(() => {
  buf.release();
  queue.release();
  ctx.release();
  rtcDevice.release();
});

type ErrorClass = typeof TypeError | typeof RangeError;
/** One bad call: what it does, and the error class it must throw. */
type Case = [string, () => unknown, ErrorClass];

function refuses(call: () => unknown, kind: ErrorClass, label: string): void {
  const before = nativeCalls;
  let thrown: unknown;
  try {
    call();
  } catch (error) {
    thrown = error;
  }
  assert.ok(thrown !== undefined, `${label}: accepted`);
  assert.equal((thrown as Error).constructor, kind, `${label}: threw ${String(thrown)}, expected a ${kind.name}`);
  assert.ok((thrown as Error).message.length > 10, `${label}: the message says what was expected`);
  assert.equal(nativeCalls, before, `${label}: a native call happened before the refusal`);
}

async function rejects(call: () => Promise<unknown>, kind: ErrorClass, label: string): Promise<void> {
  const before = nativeCalls;
  let thrown: unknown;
  try {
    await call();
  } catch (error) {
    thrown = error;
  }
  assert.ok(thrown !== undefined, `${label}: accepted`);
  assert.equal((thrown as Error).constructor, kind, `${label}: threw ${String(thrown)}, expected a ${kind.name}`);
  assert.equal(nativeCalls, before, `${label}: a native call happened before the refusal`);
}

function table(cases: Case[]): void {
  for (const [label, call, kind] of cases) refuses(call, kind, label);
}

function detached(bytes = 64): Uint8Array {
  const view = new Uint8Array(bytes);
  void transfer(view.buffer);
  return view;
}
const resizable = (bytes = 64) => new Uint8Array(new ArrayBuffer(bytes, { maxByteLength: 2 * bytes }));
const growable = (bytes = 64) => new Uint8Array(new Growable(bytes, { maxByteLength: 2 * bytes }));
/** ES2024 members this project's TypeScript lib does not declare yet. */
const transfer = (buffer: ArrayBufferLike, length?: number) =>
  (buffer as ArrayBuffer & { transfer(n?: number): ArrayBuffer }).transfer(length);
const Growable = SharedArrayBuffer as unknown as new (
  bytes: number,
  options: { maxByteLength: number },
) => SharedArrayBuffer;
const T = TypeError;
const R = RangeError;
/** Names a plain-object table lookup would find: each must name nothing. */
const inherited = ["toString", "constructor", "valueOf", "__proto__", "hasOwnProperty"];

function needSVM(): void {
  if (!device.svm.coarseGrainBuffer) skip(`device "${device.name}" has no SVM`);
}

describe("integers are range-checked for their C type", () => {
  test("createBuffer size (size_t, > 0)", () => {
    table([
      ["-1", () => ctx.createBuffer(-1), R],
      ["0", () => ctx.createBuffer(0), R],
      ["-0", () => ctx.createBuffer(-0), R],
      ["1.5", () => ctx.createBuffer(1.5), R],
      ["NaN", () => ctx.createBuffer(NaN), R],
      ["Infinity", () => ctx.createBuffer(Infinity), R],
      ["2 ** 53", () => ctx.createBuffer(2 ** 53), R],
      ["string", () => ctx.createBuffer("4096" as never), T],
      ["bigint", () => ctx.createBuffer(4096n as never), T],
      ["null", () => ctx.createBuffer(null as never), T],
    ]);
  });

  test("svmAlloc size (size_t) and alignment (cl_uint, a power of two)", () => {
    needSVM();
    table([
      ["size 0", () => ctx.svmAlloc(0), R],
      ["size -1", () => ctx.svmAlloc(-1), R],
      ["size 1.5", () => ctx.svmAlloc(1.5), R],
      ["size NaN", () => ctx.svmAlloc(NaN), R],
      ["size 2 ** 53", () => ctx.svmAlloc(2 ** 53), R],
      ["size string", () => ctx.svmAlloc("64" as never), T],
      ["size bigint", () => ctx.svmAlloc(64n as never), T],
      ["alignment 2 ** 32", () => ctx.svmAlloc(64, { alignment: 2 ** 32 }), R],
      ["alignment 3 * 2 ** 32", () => ctx.svmAlloc(64, { alignment: 3 * 2 ** 32 }), R],
      ["alignment 2 ** 33", () => ctx.svmAlloc(64, { alignment: 2 ** 33 }), R],
      ["alignment 3", () => ctx.svmAlloc(64, { alignment: 3 }), R],
      ["alignment -8", () => ctx.svmAlloc(64, { alignment: -8 }), R],
      ["alignment 1.5", () => ctx.svmAlloc(64, { alignment: 1.5 }), R],
      ["alignment NaN", () => ctx.svmAlloc(64, { alignment: NaN }), R],
      ["alignment string", () => ctx.svmAlloc(64, { alignment: "8" as never }), T],
      ["alignment bigint", () => ctx.svmAlloc(64, { alignment: 8n as never }), T],
      ["alignment null", () => ctx.svmAlloc(64, { alignment: null as never }), T],
    ]);
    const aligned = ctx.svmAlloc(64, { alignment: 64 });
    assert.equal(aligned.address % 64n, 0n);
    aligned.release();
  });

  test("transfer offsets (size_t) and ranges", async () => {
    const data = new Uint8Array(16);
    table([
      ["write offset -1", () => queue.enqueueWriteBuffer(buf, data, { offset: -1 }), R],
      ["write offset 1.5", () => queue.enqueueWriteBuffer(buf, data, { offset: 1.5 }), R],
      ["write offset NaN", () => queue.enqueueWriteBuffer(buf, data, { offset: NaN }), R],
      ["write offset 2 ** 64", () => queue.enqueueWriteBuffer(buf, data, { offset: 2 ** 64 }), R],
      ["write offset string", () => queue.enqueueWriteBuffer(buf, data, { offset: "0" as never }), T],
      ["write offset bigint", () => queue.enqueueWriteBuffer(buf, data, { offset: 0n as never }), T],
      ["write offset null", () => queue.enqueueWriteBuffer(buf, data, { offset: null as never }), T],
      ["write past the end", () => queue.enqueueWriteBuffer(buf, data, { offset: 4090 }), R],
      ["read offset -1", () => queue.enqueueReadBuffer(buf, data, { offset: -1 }), R],
      ["read offset 2 ** 32 + 1", () => queue.enqueueReadBuffer(buf, data, { offset: 2 ** 32 + 1 }), R],
      ["read offset bigint", () => queue.enqueueReadBuffer(buf, data, { offset: 1n as never }), T],
    ]);
    await rejects(() => queue.readBuffer(buf, undefined, { offset: -1 }), R, "readBuffer offset -1");
    await rejects(() => queue.readBuffer(buf, undefined, { offset: 5000 }), R, "readBuffer offset past the end");
    await rejects(() => queue.readBuffer(buf, undefined, { offset: "1" as never }), T, "readBuffer offset string");
    await rejects(() => queue.writeBuffer(buf, data, { offset: 1.5 }), R, "writeBuffer offset 1.5");
  });

  test("userEvent.setStatus (cl_int, <= 0)", () => {
    const event = ctx.createUserEvent();
    table([
      ["-(2 ** 32)", () => event.setStatus(-(2 ** 32)), R],
      ["-(2 ** 31) - 1", () => event.setStatus(-(2 ** 31) - 1), R],
      ["1", () => event.setStatus(1), R],
      ["2 ** 32", () => event.setStatus(2 ** 32), R],
      ["-1.5", () => event.setStatus(-1.5), R],
      ["NaN", () => event.setStatus(NaN), R],
      ["-Infinity", () => event.setStatus(-Infinity), R],
      ["string", () => event.setStatus("0" as never), T],
      ["bigint", () => event.setStatus(0n as never), T],
      ["null", () => event.setStatus(null as never), T],
    ]);
    assert.equal(event.status, cl.ExecutionStatus.SUBMITTED, "no refused status reached the event");
    event.setStatus(-(2 ** 31));
    assert.equal(event.status, -(2 ** 31));
    event.release();
  });

  test("platform.getDevices type (cl_device_type bitfield)", () => {
    const platform = device.platform;
    table([
      ["0", () => platform.getDevices(0), R],
      ["-1", () => platform.getDevices(-1), R],
      ["1.5", () => platform.getDevices(1.5), R],
      ["NaN", () => platform.getDevices(NaN), R],
      ["2 ** 53", () => platform.getDevices(2 ** 53), R],
      ["string", () => platform.getDevices("1" as never), T],
      ["bigint", () => platform.getDevices(1n as never), T],
    ]);
  });

  test("Embree device.getProperty (RTCDeviceProperty, an int)", () => {
    table([
      ["2 ** 32 + 1", () => rtcDevice.getProperty(2 ** 32 + 1), R],
      ["2 ** 31", () => rtcDevice.getProperty(2 ** 31), R],
      ["-1", () => rtcDevice.getProperty(-1), R],
      ["1.5", () => rtcDevice.getProperty(1.5), R],
      ["NaN", () => rtcDevice.getProperty(NaN), R],
      ["string", () => rtcDevice.getProperty("1" as never), T],
      ["bigint", () => rtcDevice.getProperty(1n as never), T],
    ]);
    assert.equal(rtcDevice.getProperty(rtc.DeviceProperty.VERSION_MAJOR), rtcDevice.version.major);
  });

  test("Embree memory budget (bytes) and ray mask (unsigned int)", () => {
    const scene = rtcDevice.newScene();
    scene.addTriangleMesh(new Float32Array([0, 0, 0, 1, 0, 0, 0, 1, 0]), new Uint32Array([0, 1, 2]));
    const ray = { origin: [0.2, 0.2, -1], direction: [0, 0, 1] };
    table([
      ["budget -1", () => rtcDevice.setMemoryBudget(-1), R],
      ["budget 1.5", () => rtcDevice.setMemoryBudget(1.5), R],
      ["budget NaN", () => rtcDevice.setMemoryBudget(NaN), R],
      ["budget Infinity", () => rtcDevice.setMemoryBudget(Infinity), R],
      ["budget string", () => rtcDevice.setMemoryBudget("5" as never), T],
      ["budget bigint", () => rtcDevice.setMemoryBudget(5n as never), T],
      ["mask 2 ** 32", () => scene.intersect1({ ...ray, mask: 2 ** 32 }), R],
      ["mask -1", () => scene.intersect1({ ...ray, mask: -1 }), R],
      ["mask 1.5", () => scene.intersect1({ ...ray, mask: 1.5 }), R],
      ["mask string", () => scene.intersect1({ ...ray, mask: "1" as never }), T],
      ["origin NaN", () => scene.intersect1({ ...ray, origin: [NaN, 0, 0] }), R],
      ["direction string", () => scene.intersect1({ ...ray, direction: ["0", 0, 1] as never }), T],
      ["tfar NaN", () => scene.intersect1({ ...ray, tfar: NaN }), R],
      ["tnear bigint", () => scene.intersect1({ ...ray, tnear: 0n as never }), T],
    ]);
    assert.equal(rtcDevice.memoryBudget, null);
    scene.release();
  });
});

describe("options are own properties of plain objects, booleans are booleans", () => {
  test("an option inherited from a patched Object.prototype is never read: its getter does not run", async () => {
    // A hostile pass: reading `bag.waitFor` before asking whether it is the bag's own ran the getter.
    const names = ["onFree", "waitFor", "hostPtr", "access", "offset", "size", "local", "alignment", "fineGrain"];
    for (const name of names) {
      Object.defineProperty(Object.prototype, name, {
        configurable: true,
        get() {
          throw new Error(`the inherited ${name} getter ran`);
        },
      });
    }
    const queue = ctx.createCommandQueue();
    try {
      const buffer = ctx.createBuffer(64, {});
      ctx.createBuffer(new Uint8Array(64), {}).release();
      await queue.enqueueSVMFree([ctx.svmAlloc(64, {})], {}).wait();
      await queue.enqueueWriteBuffer(buffer, new Uint8Array(16), {}).wait();
      await queue.enqueueMarker({}).wait();
      buffer.release();
    } finally {
      for (const name of names) delete (Object.prototype as Record<string, unknown>)[name];
      queue.release();
    }
  });

  test("a patched Object.prototype does not change memlife's own properties: get, set, writable, configurable", async () => {
    // A review: the descriptors of the read-only own properties (a context's devices, a queue's
    // device, a kernel's name, numArgs and program) were object literals, which defineProperty
    // reads through Object.prototype: an inherited `get` made every constructor throw after its
    // native create (the handle leaked), an inherited `writable` left them assignable.
    const program = ctx.createProgram("__kernel void k(__global int *o) { o[0] = 1; }");
    await program.build();
    const made: { release(): void }[] = [];
    const patches: [string, PropertyDescriptor][] = [
      ["get", { value: undefined, writable: true, configurable: true }],
      ["set", { value: undefined, writable: true, configurable: true }],
      ["writable", { value: true, writable: true, configurable: true }],
      ["configurable", { value: true, writable: true, configurable: true }],
    ];
    for (const [name, descriptor] of patches) {
      Object.defineProperty(Object.prototype, name, descriptor);
      try {
        const context = cl.createContext();
        made.push(context);
        const queue = context.createCommandQueue();
        made.push(queue);
        const kernel = program.createKernel("k");
        made.push(kernel);
        for (
          const [object, key] of [[context, "devices"], [queue, "device"], [kernel, "name"], [kernel, "numArgs"], [
            kernel,
            "program",
          ]] as const
        ) {
          const own = Object.getOwnPropertyDescriptor(object, key)!;
          assert.ok(
            own.writable === false && own.configurable === false,
            `${name} on Object.prototype: ${key} stays read-only`,
          );
        }
      } finally {
        delete (Object.prototype as Record<string, unknown>)[name];
      }
    }
    for (const object of made.reverse()) object.release();
    program.release();
  });

  test("a ray's optional fields are never a patched Object.prototype's, and a class's still count", async () => {
    // A hostile pass: with Object.prototype.tfar = 0.5 (or mask = 0, tnear = 5) every ray missed.
    const scene = rtcDevice.newScene();
    scene.addTriangleMesh(new Float32Array([0, 0, 0, 1, 0, 0, 0, 1, 0]), new Uint32Array([0, 1, 2]));
    await scene.commit();
    const ray = () => ({ origin: [0.2, 0.2, -1], direction: [0, 0, 1] });
    const proto = Object.prototype as Record<string, unknown>;
    try {
      for (const [key, value] of [["tfar", 0.5], ["mask", 0], ["tnear", 5], ["time", 2]] as const) {
        proto[key] = value;
        try {
          assert.equal(scene.intersect1(ray())?.distance, 1, `Object.prototype.${key} = ${value}`);
        } finally {
          delete proto[key];
        }
      }
      class Short {
        origin = [0.2, 0.2, -1];
        direction = [0, 0, 1];
        get tfar(): number {
          return 0.5;
        }
      }
      assert.equal(scene.intersect1(new Short()), null, "a tfar of the ray's class counts");
    } finally {
      scene.release();
    }
  });

  test("createBuffer options", () => {
    const data = new Uint8Array(64);
    table([
      ...inherited.map((name): Case => [`access ${name}`, () => ctx.createBuffer(64, { access: name as never }), T]),
      ...inherited.map((
        name,
      ): Case => [`hostPtr ${name}`, () => ctx.createBuffer(data, { hostPtr: name as never }), T]),
      ["access 1", () => ctx.createBuffer(64, { access: 1 as never }), T],
      ["options 5", () => ctx.createBuffer(64, 5 as never), T],
      ["options null", () => ctx.createBuffer(64, null as never), T],
      ["options string", () => ctx.createBuffer(64, "read_only" as never), T],
      ["options array", () => ctx.createBuffer(64, [] as never), T],
      ["options Map", () => ctx.createBuffer(64, new Map() as never), T],
      ["unknown option", () => ctx.createBuffer(64, { acess: "read_only" } as never), T],
      ["hostPtr use without data", () => ctx.createBuffer(64, { hostPtr: "use" }), T],
      ["empty data", () => ctx.createBuffer(new Uint8Array(0)), R],
      ["data not a view", () => ctx.createBuffer(new ArrayBuffer(64) as never), T],
    ]);
    ctx.createBuffer(64, Object.assign(Object.create(null), { access: "read_only" })).release();
  });

  test("createBuffer reads its options by the same rules as every other options bag", () => {
    // createBuffer reads its options in one pass of its own (src/opencl/buffer.ts, for speed):
    // the rules of options() and own() must hold there too.
    const data = new Uint8Array(64);
    const READ_ONLY = 1 << 2, USE_HOST_PTR = 1 << 3;
    const proto = Object.prototype as Record<string, unknown>;
    // An enumerable option or unknown key inherited from a tampered Object.prototype is not the caller's.
    Object.defineProperty(proto, "hostPtr", { value: "use", enumerable: true, configurable: true, writable: true });
    Object.defineProperty(proto, "bogus", { value: 1, enumerable: true, configurable: true, writable: true });
    try {
      const plain = ctx.createBuffer(64, {});
      assert.equal(plain.flags & USE_HOST_PTR, 0, "an inherited hostPtr must not count");
      plain.release();
    } finally {
      delete proto.hostPtr;
      delete proto.bogus;
    }
    // An own option counts even when it is not enumerable.
    const hidden = {};
    Object.defineProperty(hidden, "access", { value: "read_only", enumerable: false });
    const readOnly = ctx.createBuffer(64, hidden);
    assert.equal(readOnly.flags & READ_ONLY, READ_ONLY, "a non-enumerable own access must count");
    readOnly.release();
    const hiddenUse = {};
    Object.defineProperty(hiddenUse, "hostPtr", { value: "use", enumerable: false });
    const used = ctx.createBuffer(data, hiddenUse);
    assert.equal(used.flags & USE_HOST_PTR, USE_HOST_PTR, "a non-enumerable own hostPtr must count");
    used.release();
    // Every key is checked before any value is read, and each value is read once.
    let reads = 0;
    const getter = {
      get hostPtr() {
        reads++;
        return "use";
      },
      bogus: 1,
    };
    assert.throws(() => ctx.createBuffer(data, getter as never), /createBuffer options has no option "bogus"/);
    assert.equal(reads, 0, "no option may be read before the keys were checked");
    const once = {
      get hostPtr() {
        reads++;
        return "use";
      },
    };
    const viaGetter = ctx.createBuffer(data, once as never);
    assert.equal(reads, 1, "an option is read once");
    viaGetter.release();
    // A prototype-free bag works as a plain object does.
    ctx.createBuffer(data, Object.assign(Object.create(null), { hostPtr: "use", access: "read_only" })).release();
  });

  test("svmAlloc options", () => {
    needSVM();
    table([
      ...inherited.map((name): Case => [`access ${name}`, () => ctx.svmAlloc(64, { access: name as never }), T]),
      ["fineGrain 'no'", () => ctx.svmAlloc(64, { fineGrain: "no" as never }), T],
      ["fineGrain 1", () => ctx.svmAlloc(64, { fineGrain: 1 as never }), T],
      ["fineGrain null", () => ctx.svmAlloc(64, { fineGrain: null as never }), T],
      ["atomics 'yes'", () => ctx.svmAlloc(64, { atomics: "yes" as never }), T],
      ["atomics 0", () => ctx.svmAlloc(64, { atomics: 0 as never }), T],
      ["options 5", () => ctx.svmAlloc(64, 5 as never), T],
      ["options null", () => ctx.svmAlloc(64, null as never), T],
      ["options array", () => ctx.svmAlloc(64, [] as never), T],
      ["unknown option", () => ctx.svmAlloc(64, { fine: true } as never), T],
    ]);
  });

  test("enqueueSVMFree arguments", () => {
    needSVM();
    const a = ctx.svmAlloc(64);
    table([
      ["options 5", () => queue.enqueueSVMFree([a], 5 as never), T],
      ["options null", () => queue.enqueueSVMFree([a], null as never), T],
      ["options string", () => queue.enqueueSVMFree([a], "x" as never), T],
      ["onFree 5", () => queue.enqueueSVMFree([a], { onFree: 5 as never }), T],
      ["waitFor 5", () => queue.enqueueSVMFree([a], { waitFor: 5 as never }), T],
      ["waitFor null", () => queue.enqueueSVMFree([a], { waitFor: null as never }), T],
      ["waitFor [5]", () => queue.enqueueSVMFree([a], { waitFor: [5] as never }), T],
      ["unknown option", () => queue.enqueueSVMFree([a], { onfree: () => {} } as never), T],
      ["not an array", () => queue.enqueueSVMFree(a as never), T],
      ["array of numbers", () => queue.enqueueSVMFree([5] as never), T],
      ["twice", () => queue.enqueueSVMFree([a, a]), T],
      // With no options, the front of enqueueSVMFree (one allocation, or the list) by the same rules.
      ["a Proxy of the allocation", () => queue.enqueueSVMFree([new Proxy(a, {})] as never), T],
      [
        "a length no array has",
        () => queue.enqueueSVMFree(new Proxy([a], { get: (t, k) => k === "length" ? 1.5 : t[k as never] })),
        T,
      ],
      ["a number after it", () => queue.enqueueSVMFree([a, 5] as never), T],
    ]);
    assert.ok(a.alive, "refused calls left the allocation alone");
    a.release();
  });

  test("enqueueSVMFree reads its options by the same rules as every other options bag", async () => {
    // enqueueSVMFree reads its options in one pass of its own (src/opencl/queue.ts, for speed):
    // the rules of options() and own() must hold there too.
    needSVM();
    const proto = Object.prototype as Record<string, unknown>;
    let inheritedCalls = 0;
    // An enumerable option or unknown key inherited from a tampered Object.prototype is not the caller's.
    Object.defineProperty(proto, "onFree", {
      value: () => inheritedCalls++,
      enumerable: true,
      configurable: true,
      writable: true,
    });
    Object.defineProperty(proto, "bogus", { value: 1, enumerable: true, configurable: true, writable: true });
    try {
      const event = queue.enqueueSVMFree([ctx.svmAlloc(64)], {});
      await event.wait();
      event.release();
    } finally {
      delete proto.onFree;
      delete proto.bogus;
    }
    assert.equal(inheritedCalls, 0, "an inherited onFree must not count");
    // An own option counts even when it is not enumerable.
    let hiddenCalls = 0;
    const hidden = {};
    Object.defineProperty(hidden, "onFree", { value: () => hiddenCalls++, enumerable: false });
    const freed = queue.enqueueSVMFree([ctx.svmAlloc(64)], hidden);
    await freed.wait();
    freed.release();
    assert.equal(hiddenCalls, 1, "a non-enumerable own onFree must count");
    // Every key is checked before any value is read, and each value is read once.
    let reads = 0;
    const a = ctx.svmAlloc(64);
    const getter = {
      get onFree() {
        reads++;
        return () => {};
      },
      bogus: 1,
    };
    assert.throws(() => queue.enqueueSVMFree([a], getter as never), /enqueueSVMFree options has no option "bogus"/);
    assert.equal(reads, 0, "no option may be read before the keys were checked");
    assert.ok(a.alive, "the refused free left the allocation alone");
    const once = {
      get onFree() {
        reads++;
        return () => {};
      },
    };
    const viaGetter = queue.enqueueSVMFree([a], once as never);
    assert.equal(reads, 1, "an option is read once");
    await viaGetter.wait();
    viaGetter.release();
    // A prototype-free bag works as a plain object does.
    let bareCalls = 0;
    const bare = queue.enqueueSVMFree(
      [ctx.svmAlloc(64)],
      Object.assign(Object.create(null), { onFree: () => bareCalls++, waitFor: [] }),
    );
    await bare.wait();
    bare.release();
    assert.equal(bareCalls, 1, "a prototype-free bag's onFree must count");
    const kept = ctx.svmAlloc(64);
    assert.throws(() => queue.enqueueSVMFree([kept], new Map() as never), /must be a plain object/);
    kept.release();
  });

  test("read and write options and targets", async () => {
    table([
      ["write options 5", () => queue.enqueueWriteBuffer(buf, new Uint8Array(4), 5 as never), T],
      ["write options null", () => queue.enqueueWriteBuffer(buf, new Uint8Array(4), null as never), T],
      ["write unknown option", () => queue.enqueueWriteBuffer(buf, new Uint8Array(4), { ofset: 0 } as never), T],
      ["read options array", () => queue.enqueueReadBuffer(buf, new Uint8Array(4), [] as never), T],
      ["read waitFor 'x'", () => queue.enqueueReadBuffer(buf, new Uint8Array(4), { waitFor: "x" as never }), T],
      ["read target ArrayBuffer", () => queue.enqueueReadBuffer(buf, new ArrayBuffer(4) as never), T],
      ["write data number", () => queue.enqueueWriteBuffer(buf, 4 as never), T],
      ["buffer not a Buffer", () => queue.enqueueWriteBuffer({} as never, new Uint8Array(4)), T],
    ]);
    await rejects(() => queue.readBuffer(buf, undefined, 5 as never), T, "readBuffer options 5");
    await rejects(
      () => queue.writeBuffer(buf, new Uint8Array(4), { offst: 0 } as never),
      T,
      "writeBuffer unknown option",
    );
  });

  test("contexts and queues", () => {
    table([
      ["createContext([])", () => cl.createContext([]), T],
      ["createContext([5])", () => cl.createContext([5] as never), T],
      ["createContext('gpu')", () => cl.createContext("gpu" as never), T],
      ["createContext([device, {}])", () => cl.createContext([device, {}] as never), T],
      ["createCommandQueue(5)", () => ctx.createCommandQueue(5 as never), T],
      ["setDestructorCallback(5)", () => buf.setDestructorCallback(5 as never), T],
      ["onCallbackError(5)", () => onCallbackError(5 as never), T],
      ["onCallbackError('log')", () => onCallbackError("log" as never), T],
    ]);
  });

  test("rtc.Scene is made by device.newScene() only: new rtc.Scene() of the program's is refused", () => {
    // A hostile pass: `new rtc.Scene(device)` made a scene over an undefined handle (Node traced it
    // and crashed in intersect1, Bun crashed at once, Deno leaked the device's reference).
    const Scene = rtc.Scene as unknown as new (...args: unknown[]) => rtc.Scene;
    table([
      ["new rtc.Scene(device)", () => new Scene(rtcDevice), T],
      ["new rtc.Scene(device, 4096)", () => new Scene(rtcDevice, 4096), T],
      [
        "new rtc.Scene(a symbol, device, ...)",
        () => new Scene(Symbol("memlife.factory"), rtcDevice, 4096, {}, 4096),
        T,
      ],
      ["a subclass", () => new (class extends Scene {})(rtcDevice), T],
    ]);
    rtcDevice.newScene().release(); // newScene itself still makes them
  });

  test("Embree options", () => {
    const scene = rtcDevice.newScene();
    table([
      ["config 5", () => rtc.newDevice(5 as never), T],
      ["config with NUL", () => rtc.newDevice("threads=1\0verbose=3"), T],
      ["options 5", () => rtc.newDevice("", 5 as never), T],
      ["options null", () => rtc.newDevice("", null as never), T],
      ["accounting 1", () => rtc.newDevice("", { accounting: 1 as never }), T],
      ["accounting 'yes'", () => rtc.newDevice("", { accounting: "yes" as never }), T],
      ["unknown option", () => rtc.newDevice("", { acounting: true } as never), T],
      ["monitor 5", () => rtcDevice.setMemoryMonitorFunction(5 as never), T],
      ["vertices not Float32Array", () => scene.addTriangleMesh([0, 0, 0] as never, new Uint32Array([0, 0, 0])), T],
      ["index out of range", () => scene.addTriangleMesh(new Float32Array(9), new Uint32Array([0, 1, 3])), R],
      [
        "detached vertices",
        () => scene.addTriangleMesh(new Float32Array(detached(36).buffer), new Uint32Array([0, 1, 2])),
        T,
      ],
      ["ray null", () => scene.intersect1(null as never), T],
      ["monitorDiagnostics({})", () => monitorDiagnostics({} as never), T],
    ]);
    scene.release();
  });

  test("addTriangleMesh asks no Proxy in the prototype chain of the indices' ArrayBuffer (it could release the scene)", () => {
    // Before, `instanceof SharedArrayBuffer` ran the Proxy's getPrototypeOf trap inside the call.
    const scene = rtcDevice.newScene();
    const indices = new Uint32Array([0, 1, 2]);
    let asked = 0;
    Object.setPrototypeOf(
      indices.buffer,
      new Proxy(ArrayBuffer.prototype, {
        getPrototypeOf(target) {
          asked++;
          scene.release();
          return Reflect.getPrototypeOf(target);
        },
      }),
    );
    const id = scene.addTriangleMesh(new Float32Array([0, 0, 0, 1, 0, 0, 0, 1, 0]), indices);
    assert(asked === 0 && id === 0, `trap asked ${asked} times, geometry ${id}`);
    scene.release();
  });
});

describe("a list is read once, and its length must be an array's", () => {
  // Only a Proxy can answer `length` with something no array has. Before, such a length reached C
  // on some runtimes and not others: `true` freed the allocation on Bun and was a raw FFI
  // TypeError on Node and Deno; NaN gave globalSize's work_dim CL_INVALID_WORK_DIMENSION; others an
  // engine's "Invalid array length", worded by the engine.
  const lengths: unknown[] = [1.5, -1, NaN, Infinity, true, "1", 1n, 2 ** 32, undefined];
  const lying = <T>(items: T[], length: unknown): T[] =>
    new Proxy(items, { get: (t, key) => (key === "length" ? length : Reflect.get(t, key)) });
  /** Each list-taking call with a list of `items` whose length answers each of `lengths`. */
  function eachLength<T>(label: string, items: () => T[], call: (list: T[]) => unknown): Case[] {
    return lengths.map((length): Case => [`${label}, length ${String(length)}`, () => call(lying(items(), length)), T]);
  }
  test("enqueueSVMFree, waitFor, createContext, setSVMPointers, globalSize, local, offset", async () => {
    const marker = queue.enqueueMarker();
    const program = ctx.createProgram("__kernel void k(__global int *o) { o[get_global_id(0)] = 1; }");
    await program.build();
    const kernel = program.createKernel("k");
    kernel.setArg(0, buf);
    const cases: Case[] = [
      ...eachLength("waitFor", () => [marker], (list) => queue.enqueueMarker({ waitFor: list })),
      ...eachLength("createContext", () => [device], (list) => cl.createContext(list)),
      ...eachLength("globalSize", () => [4], (list) => queue.enqueueNDRangeKernel(kernel, list)),
      ...eachLength("local", () => [4], (list) => queue.enqueueNDRangeKernel(kernel, [4], { local: list })),
      ...eachLength("offset", () => [0], (list) => queue.enqueueNDRangeKernel(kernel, [4], { offset: list })),
    ];
    const allocations: cl.SVMAllocation[] = [];
    if (device.svm.coarseGrainBuffer) {
      const a = ctx.svmAlloc(64);
      allocations.push(a);
      cases.push(
        ...eachLength("enqueueSVMFree", () => [a], (list) => queue.enqueueSVMFree(list)),
        ...eachLength("enqueueSVMFree with onFree", () => [a], (list) => queue.enqueueSVMFree(list, { onFree() {} })),
        ...eachLength("setSVMPointers", () => [a], (list) => kernel.setSVMPointers(list)),
      );
    }
    table(cases);
    for (const a of allocations) {
      assert.ok(a.alive, "refused frees left the allocation alone");
      a.release();
    }
    await rejects(() => program.build("", lying([device], true)), T, "build devices, length true");
    kernel.release();
    program.release();
    marker.release();
  });
});

describe("memory native code keeps must not move, shrink or be detached", () => {
  test("refused before any native call: resizable, growable and detached views", () => {
    table([
      ["use resizable", () => ctx.createBuffer(resizable(), { hostPtr: "use" }), T],
      ["use growable", () => ctx.createBuffer(growable(), { hostPtr: "use" }), T],
      ["use detached", () => ctx.createBuffer(detached(), { hostPtr: "use" }), T],
      ["copy detached", () => ctx.createBuffer(detached()), T],
      ["read into resizable", () => queue.enqueueReadBuffer(buf, resizable()), T],
      ["read into growable", () => queue.enqueueReadBuffer(buf, growable()), T],
      ["read into detached", () => queue.enqueueReadBuffer(buf, detached()), T],
      ["write from resizable", () => queue.enqueueWriteBuffer(buf, resizable()), T],
      ["write from growable", () => queue.enqueueWriteBuffer(buf, growable()), T],
      ["write from detached", () => queue.enqueueWriteBuffer(buf, detached()), T],
    ]);
    // Copied at once, so a resizable source is fine there.
    ctx.createBuffer(resizable()).release();
  });

  test("a hostPtr use buffer whose host memory was transferred is refused by every command", async () => {
    const host = new Uint8Array(64);
    const use = ctx.createBuffer(host, { hostPtr: "use" });
    const destroyed = use.destroyed;
    void transfer(host.buffer);
    table([
      ["write", () => queue.enqueueWriteBuffer(use, new Uint8Array(64)), T],
      ["read", () => queue.enqueueReadBuffer(use, new Uint8Array(64)), T],
    ]);
    use.release();
    await destroyed;
  });

  test('a view a "use" buffer took before is checked again: once transferred away it is refused', async () => {
    const host = new Float32Array(16);
    for (let i = 0; i < 3; i++) {
      const use = ctx.createBuffer(host, { hostPtr: "use" });
      const destroyed = use.destroyed;
      use.release();
      await destroyed;
    }
    const sub = host.subarray(4);
    ctx.createBuffer(sub, { hostPtr: "use" }).release();
    void transfer(host.buffer);
    table([
      ["use the same view", () => ctx.createBuffer(host, { hostPtr: "use" }), T],
      ["use its subarray", () => ctx.createBuffer(sub, { hostPtr: "use" }), T],
      ["copy the same view", () => ctx.createBuffer(host, { hostPtr: "copy" }), T],
    ]);
  });

  for (
    const mode of [
      "resizable-use",
      "growable-use",
      "resizable-read",
      "resizable-write",
      "transfer-use",
      "transfer-read",
      "transfer-write",
      "transfer-create",
      "transfer-mesh",
    ]
  ) {
    test(`${mode}: refused with a TypeError, no crash`, async () => {
      const result = await runScript(new URL("./fixtures/robust-pinned.ts", import.meta.url), [mode], {
        timeout: 30_000,
      });
      assert.equal(result.signal, null, `${mode} crashed: ${result.signal}\n${result.stderr}`);
      assert.equal(result.code, 0, result.stderr);
      assert.match(result.stdout, /^refused: TypeError: /m, result.stdout + result.stderr);
    }, 40_000);
  }
});

describe("zero-length transfers and empty views", () => {
  test("a zero-length read and write complete like C's (size 0, a valid pointer)", async () => {
    const read = queue.enqueueReadBuffer(buf, new Uint8Array(0));
    assert.equal(read.commandType, cl.CommandType.READ_BUFFER);
    await read.wait();
    read.release();
    const write = queue.enqueueWriteBuffer(buf, new Float32Array(0), { offset: 4096 });
    await write.wait();
    write.release();
    assert.equal((await queue.readBuffer(buf, new Uint8Array(new ArrayBuffer(8), 8, 0))).byteLength, 0);
    await queue.writeBuffer(buf, new Uint8Array(16).subarray(16));
  });

  test("pointerOf: an empty view has no memory to point to on every runtime, a detached one is refused", () => {
    assert.throws(() => backend.pointerOf(new Uint8Array(0)), RangeError);
    assert.throws(() => backend.pointerOf(new Uint8Array(16).subarray(4, 4)), RangeError);
    assert.throws(() => backend.pointerOf(detached()), TypeError);
    const view = new Uint8Array(16);
    assert.equal(backend.address(backend.pointerOf(view.subarray(4))) - backend.address(backend.pointerOf(view)), 4n);
  });
});

describe("use after release and double release, every kind of object", () => {
  function released(label: string, call: () => unknown): void {
    const before = nativeCalls;
    assert.throws(call, ReleasedError, label);
    assert.equal(nativeCalls, before, `${label}: a native call happened`);
  }

  test("context", () => {
    const c = cl.createContext();
    c.release();
    c.release();
    c[Symbol.dispose]();
    released("createBuffer", () => c.createBuffer(64));
    released("createCommandQueue", () => c.createCommandQueue());
    released("createUserEvent", () => c.createUserEvent());
    released("retain", () => c.retain());
    released("referenceCount", () => c.referenceCount);
    released("svmAlloc", () => c.svmAlloc(64));
    assert.equal(c.alive, false);
  });

  test("queue", async () => {
    const q = ctx.createCommandQueue();
    q.release();
    q.release();
    q[Symbol.dispose]();
    released("flush", () => q.flush());
    released("enqueueWriteBuffer", () => q.enqueueWriteBuffer(buf, new Uint8Array(4)));
    released("enqueueReadBuffer", () => q.enqueueReadBuffer(buf, new Uint8Array(4)));
    released("retain", () => q.retain());
    await assert.rejects(q.finish(), ReleasedError);
    await assert.rejects(q.readBuffer(buf), ReleasedError);
  });

  test("queue with a mapping: a second release() is a no-op and leaves the mapping's reference, as the first does", async () => {
    if (!ctx.devices[0].svm.coarseGrainBuffer) skip("no SVM on this device");
    const c = cl.createContext();
    const q = c.createCommandQueue();
    const a = c.svmAlloc(4096);
    const mapping = await q.mapSVM(a);
    q.release();
    q.release(); // the program's second release: before, it took the mapping's reference
    q[Symbol.dispose]();
    const unmapped = mapping.unmap(); // before: ReleasedError, and the allocation stayed in use for good
    await unmapped.wait();
    unmapped.release();
    a.release();
    // The unmap's pin is let go once memlife sees it complete; the queue's native release runs off the JS thread.
    for (let i = 0; i < 100 && c.liveObjects > 0; i++) await sleep(20);
    assert.equal(c.liveObjects, 0, "the allocation or the queue is still held");
    assert.equal(q.alive, false);
    c.release();
  });

  test("buffer", async () => {
    const b = ctx.createBuffer(64);
    b.release();
    b.release();
    b[Symbol.dispose]();
    released("retain", () => b.retain());
    released("setDestructorCallback", () => b.setDestructorCallback(() => {}));
    released("hostPointer", () => b.hostPointer);
    released("write into it", () => queue.enqueueWriteBuffer(b, new Uint8Array(4)));
    await assert.rejects(b.destroyed, ReleasedError);
  });

  test("SVM allocation", () => {
    needSVM();
    const a = ctx.svmAlloc(64);
    a.release();
    a.release();
    a[Symbol.dispose]();
    released("address", () => a.address);
    released("enqueueSVMFree", () => queue.enqueueSVMFree([a]));
  });

  test("user event and event", async () => {
    const u = ctx.createUserEvent();
    u.release();
    u.release();
    u[Symbol.dispose]();
    released("setStatus", () => u.setStatus(0));
    released("status", () => u.status);
    released("as a waitFor", () => queue.enqueueWriteBuffer(buf, new Uint8Array(4), { waitFor: [u] }));
    const e = queue.enqueueWriteBuffer(buf, new Uint8Array(4));
    await e.wait();
    e.release();
    e.release();
    released("commandType", () => e.commandType);
    released("retain", () => e.retain());
    await assert.rejects(e.wait(), ReleasedError);
  });

  test("Embree device and scene; scene.committed is false once released", async () => {
    const d = rtc.newDevice("threads=1");
    const s = d.newScene();
    s.addTriangleMesh(new Float32Array([0, 0, 0, 1, 0, 0, 0, 1, 0]), new Uint32Array([0, 1, 2]));
    await s.commit();
    assert.equal(s.committed, true);
    s.release();
    s.release();
    s[Symbol.dispose]();
    assert.equal(s.committed, false);
    released("addTriangleMesh", () => s.addTriangleMesh(new Float32Array(9), new Uint32Array([0, 1, 2])));
    released("intersect1", () => s.intersect1({ origin: [0, 0, -1], direction: [0, 0, 1] }));
    released("retain", () => s.retain());
    await assert.rejects(s.commit(), ReleasedError);
    d.release();
    d.release();
    d[Symbol.dispose]();
    released("newScene", () => d.newScene());
    released("getProperty", () => d.getProperty(0));
    released("setMemoryBudget", () => d.setMemoryBudget(1));
    released("setMemoryMonitorFunction", () => d.setMemoryMonitorFunction(null));
  });
});

describe("parents released before their children", () => {
  for (const mode of ["context", "embree"]) {
    test(`${mode}: the children keep working and nothing crashes`, async () => {
      const result = await runScript(new URL("./fixtures/robust-parents.ts", import.meta.url), [mode], {
        timeout: 30_000,
      });
      assert.equal(result.signal, null, `crashed: ${result.signal}\n${result.stderr}`);
      assert.equal(result.code, 0, result.stdout + result.stderr);
      assert.match(result.stdout, /^ok$/m);
    }, 40_000);
  }
});

describe("devices and error names", () => {
  test("getDevices(DEFAULT) is the driver's answer to clGetDeviceIDs(CL_DEVICE_TYPE_DEFAULT)", () => {
    for (const platform of cl.getPlatforms()) {
      const all = platform.getDevices();
      if (all.length === 0) continue;
      const defaults = platform.getDevices(cl.DeviceType.DEFAULT);
      assert.ok(defaults.length >= 1, `${platform.name}: no default device`);
      for (const d of defaults) assert.ok(all.includes(d), "the same Device objects as getDevices()");
      const byType = platform.getDevices(cl.DeviceType.CPU | cl.DeviceType.GPU | cl.DeviceType.ACCELERATOR);
      for (const d of byType) assert.ok(all.includes(d));
    }
  });

  test("every status code of the Khronos headers has its name; others a readable one", () => {
    const cases: [number, string][] = [
      [0, "CL_SUCCESS"],
      [-30, "CL_INVALID_VALUE"],
      [-72, "CL_MAX_SIZE_RESTRICTION_EXCEEDED"],
      [-1000, "CL_INVALID_GL_SHAREGROUP_REFERENCE_KHR"],
      [-1001, "CL_PLATFORM_NOT_FOUND_KHR"],
      [-1002, "CL_INVALID_D3D10_DEVICE_KHR"],
      [-1006, "CL_INVALID_D3D11_DEVICE_KHR"],
      [-1010, "CL_INVALID_DX9_MEDIA_ADAPTER_KHR"],
      [-1057, "CL_DEVICE_PARTITION_FAILED_EXT"],
      [-1093, "CL_INVALID_EGL_OBJECT_KHR"],
      [-1094, "CL_INVALID_ACCELERATOR_INTEL"],
      [-1098, "CL_INVALID_VA_API_MEDIA_ADAPTER_INTEL"],
      [-1121, "CL_CONTEXT_TERMINATED_KHR"],
      [-1138, "CL_INVALID_COMMAND_BUFFER_KHR"],
      [-1142, "CL_INVALID_SEMAPHORE_KHR"],
    ];
    for (const [code, name] of cases) assert.equal(new OpenCLError("clFoo", code).codeName, name);
    assert.equal(new OpenCLError("clFoo", -9999).codeName, "CL_UNKNOWN_ERROR_-9999");
    assert.match(new OpenCLError("clFoo", -9999).message, /clFoo failed: CL_UNKNOWN_ERROR_-9999 \(-9999\)/);
  });
});
