/**
 * The public surface, written out: every name the package exports and every public member of each
 * exported class (prototype and instance). A member only memlife's own modules call must be keyed
 * by a symbol of src/internal.ts; one that appears here by name fails this file, and so does a
 * public member removed or added without updating the list (a semver decision, not an accident).
 */
import { describe, test } from "vitest";
import { assert } from "./helpers.ts";
import * as memlife from "../src/mod.ts";
import * as internal from "../src/internal.ts";
import { finalizerState } from "../src/callbacks.ts";

const { cl, rtc } = memlife;

const vectorTypes = ["char", "uchar", "short", "ushort", "int", "uint", "long", "ulong", "float", "double"]
  .flatMap((t) => [t, `${t}2`, `${t}3`, `${t}4`, `${t}8`, `${t}16`]);

const exportsList = {
  "": [
    "EmbreeError",
    "LibraryLoadError",
    "OpenCLError",
    "ReleasedError",
    "WorkerError",
    "cl",
    "onCallbackError",
    "rtc",
    "runtime",
  ],
  cl: [
    "Buffer",
    "CommandQueue",
    "CommandType",
    "Context",
    "Device",
    "DeviceType",
    "Event",
    "ExecutionStatus",
    "Kernel",
    "LocalMemory",
    "MemFlags",
    "Platform",
    "Program",
    "SVMAllocation",
    "SVMMapping",
    "TypedValue",
    "UserEvent",
    "createContext",
    "defaultDevice",
    "getPlatforms",
    "library",
    "local",
    ...vectorTypes,
  ],
  rtc: ["Device", "DeviceProperty", "Scene", "load", "newDevice", "version"],
};

/** String-named properties of each class's prototype chain (methods, getters), less `constructor` and what Object and Error define. */
const prototypes: Record<string, readonly string[]> = {
  "cl.Buffer": [
    "alive",
    "context",
    "destroyed",
    "flags",
    "hostPointer",
    "referenceCount",
    "release",
    "retain",
    "setDestructorCallback",
    "size",
    "unsafeHandle",
  ],
  "cl.CommandQueue": [
    "alive",
    "context",
    "enqueueBarrier",
    "enqueueCopyBuffer",
    "enqueueFillBuffer",
    "enqueueMarker",
    "enqueueNDRangeKernel",
    "enqueueReadBuffer",
    "enqueueSVMFree",
    "enqueueSVMMap",
    "enqueueSVMMemFill",
    "enqueueSVMMemcpy",
    "enqueueWriteBuffer",
    "finish",
    "flush",
    "mapSVM",
    "readBuffer",
    "referenceCount",
    "release",
    "retain",
    "unsafeHandle",
    "writeBuffer",
  ],
  "cl.Context": [
    "alive",
    "createBuffer",
    "createCommandQueue",
    "createProgram",
    "createUserEvent",
    "liveObjects",
    "referenceCount",
    "release",
    "retain",
    "svmAlloc",
    "unsafeHandle",
  ],
  "cl.Device": ["unsafeHandle"],
  "cl.Event": ["alive", "commandType", "context", "release", "retain", "status", "unsafeHandle", "wait"],
  "cl.Kernel": [
    "alive",
    "argInfo",
    "compileWorkGroupSize",
    "context",
    "localMemSize",
    "preferredWorkGroupSizeMultiple",
    "release",
    "retain",
    "setArg",
    "setSVMPointers",
    "unsafeHandle",
    "workGroupSize",
  ],
  "cl.LocalMemory": [],
  "cl.Platform": ["getDevices", "unsafeHandle"],
  "cl.Program": [
    "alive",
    "build",
    "buildLog",
    "buildStatus",
    "context",
    "createKernel",
    "createKernels",
    "kernelNames",
    "numKernels",
    "release",
    "retain",
    "source",
    "unsafeHandle",
  ],
  "cl.SVMAllocation": [
    "address",
    "alive",
    "arrayBuffer",
    "commandsInFlight",
    "context",
    "fineGrain",
    "release",
    "size",
  ],
  "cl.SVMMapping": ["alive", "allocation", "arrayBuffer", "mapped", "offset", "size", "unmap"],
  "cl.TypedValue": [],
  "cl.UserEvent": [
    "alive",
    "commandType",
    "context",
    "release",
    "retain",
    "setStatus",
    "status",
    "unsafeHandle",
    "wait",
  ],
  "rtc.Device": [
    "alive",
    "getProperty",
    "memory",
    "memoryBudget",
    "newScene",
    "release",
    "retain",
    "setMemoryBudget",
    "setMemoryMonitorFunction",
    "unsafeHandle",
  ],
  "rtc.Scene": ["addTriangleMesh", "alive", "commit", "committed", "intersect1", "release", "retain", "unsafeHandle"],
  EmbreeError: [],
  LibraryLoadError: [],
  OpenCLError: [],
  ReleasedError: [],
  WorkerError: [],
};

/** Own string-named properties of instances (public readonly fields). */
const instances: Record<string, readonly string[]> = {
  "cl.Context": ["devices"],
  "cl.Buffer": [],
  "cl.CommandQueue": ["device"],
  "cl.Event": [],
  "cl.UserEvent": [],
  "cl.SVMAllocation": [],
  "cl.Program": [],
  "cl.Kernel": ["name", "numArgs", "program"],
  "cl.SVMMapping": ["event"],
  "cl.Platform": ["extensions", "name", "profile", "vendor", "version"],
  "cl.Device": [
    "driverVersion",
    "globalMemSize",
    "localMemSize",
    "maxComputeUnits",
    "maxMemAllocSize",
    "name",
    "platform",
    "svm",
    "type",
    "typeMask",
    "vendor",
    "version",
  ],
  "cl.TypedValue": ["bytes", "type"],
  "cl.LocalMemory": ["size"],
  "rtc.Device": ["config", "version"],
  "rtc.Scene": ["device"],
};

/**
 * Symbol-keyed statics allowed on a public class: the seams of memlife's own modules, reached only
 * through the class (frozen). Its objects and prototypes have none but Symbol.dispose: what a
 * program can write over on an object is never what memlife reads (robust-internals.ts).
 */
const allowedStatics = new Set<symbol>([
  finalizerState,
  ...Object.values(internal).filter((value) => typeof value === "symbol") as symbol[],
]);

function namespaceOf(prefix: string): Record<string, unknown> {
  return (prefix === "" ? memlife : prefix === "cl" ? cl : rtc) as unknown as Record<string, unknown>;
}

function classes(): [string, new (...args: never[]) => unknown][] {
  const out: [string, new (...args: never[]) => unknown][] = [];
  for (const prefix of Object.keys(exportsList)) {
    for (const [name, value] of Object.entries(namespaceOf(prefix))) {
      if (typeof value === "function" && /^class\b/.test(Function.prototype.toString.call(value))) {
        out.push([prefix === "" ? name : `${prefix}.${name}`, value as new (...args: never[]) => unknown]);
      }
    }
  }
  return out;
}

/** The prototypes a class's instances inherit from, up to the built-in ones. */
function chain(cls: new (...args: never[]) => unknown): object[] {
  const out: object[] = [];
  for (
    let p = cls.prototype as object | null;
    p !== null && p !== Object.prototype && p !== Error.prototype;
    p = Object.getPrototypeOf(p)
  ) out.push(p);
  return out;
}

function checkSymbols(where: string, object: object): void {
  for (const symbol of Object.getOwnPropertySymbols(object)) {
    assert.ok(symbol === Symbol.dispose, `${where} has ${String(symbol)}: memlife's seams are its classes' statics`);
  }
}

/** A class and the classes it extends, up to the built-in ones. */
function constructors(cls: object): object[] {
  const out: object[] = [];
  for (
    let c: object | null = cls;
    c !== null && c !== Function.prototype && c !== Error;
    c = Object.getPrototypeOf(c)
  ) {
    out.push(c);
  }
  return out;
}

describe("public surface", () => {
  test("the package exports exactly the listed names", () => {
    for (const [prefix, names] of Object.entries(exportsList)) {
      assert.deepEqual(Object.keys(namespaceOf(prefix)).sort(), [...names].sort(), `exports of ${prefix || "memlife"}`);
    }
  });

  test("every exported class's prototype has exactly the listed public members, and no string-named internal", () => {
    const found = classes();
    assert.deepEqual(found.map(([name]) => name).sort(), Object.keys(prototypes).sort(), "exported classes");
    const internalNames = new Set(
      Object.values(internal).filter((s) => typeof s === "symbol").map((s) => s.description!.replace(/^memlife\./, "")),
    );
    for (
      const name of [
        "handle",
        "nativeHandle",
        "adopt",
        "disown",
        "surrender",
        "completion",
        "state",
        "command",
        "pin",
        "use",
        "unuse",
        "track",
        "pointer",
      ]
    ) {
      internalNames.add(name);
    }
    for (const [name, cls] of found) {
      const members = [...new Set(chain(cls).flatMap((p) => Object.getOwnPropertyNames(p)))].filter((n) =>
        n !== "constructor"
      ).sort();
      for (const member of members) {
        assert.ok(
          !internalNames.has(member),
          `${name}.prototype.${member} is internal: key it with a symbol of src/internal.ts`,
        );
      }
      assert.deepEqual(members, prototypes[name], `public members of ${name}`);
      for (const p of chain(cls)) checkSymbols(`${name}'s prototype chain`, p);
      const statics = Object.getOwnPropertyNames(cls).filter((n) => !["length", "name", "prototype"].includes(n));
      assert.deepEqual(statics, [], `static members of ${name}`);
      for (const c of constructors(cls)) {
        const symbols = Object.getOwnPropertySymbols(c);
        for (const symbol of symbols) {
          assert.ok(allowedStatics.has(symbol), `${name} has the static ${String(symbol)}, not one of src/internal.ts`);
        }
        if (symbols.length > 0) {
          assert.ok(Object.isFrozen(c), `${name} (or a class it extends) has internal statics and is not frozen`);
        }
      }
    }
  });

  test("instances carry only the listed public fields", async () => {
    using ctx = cl.createContext();
    using buf = ctx.createBuffer(64);
    using queue = ctx.createCommandQueue();
    using event = queue.enqueueWriteBuffer(buf, new Uint8Array(8));
    using user = ctx.createUserEvent();
    user.setStatus();
    using program = ctx.createProgram("__kernel void k(__global int *x) { x[0] = 1; }");
    await program.build();
    using kernel = program.createKernel("k");
    using device = rtc.newDevice();
    using scene = device.newScene();
    const objects: Record<string, object> = {
      "cl.Context": ctx,
      "cl.Buffer": buf,
      "cl.CommandQueue": queue,
      "cl.Event": event,
      "cl.UserEvent": user,
      "cl.Program": program,
      "cl.Kernel": kernel,
      "cl.Platform": ctx.devices[0].platform,
      "cl.Device": ctx.devices[0],
      "cl.TypedValue": cl.int(1),
      "cl.LocalMemory": cl.local(4),
      "rtc.Device": device,
      "rtc.Scene": scene,
    };
    if (ctx.devices[0].svm.coarseGrainBuffer) {
      const svm = ctx.svmAlloc(64);
      const mapping = await queue.mapSVM(svm);
      objects["cl.SVMAllocation"] = svm;
      objects["cl.SVMMapping"] = mapping;
      await event.wait();
      for (const [name, object] of Object.entries(objects)) {
        assert.deepEqual(Object.getOwnPropertyNames(object).sort(), instances[name], `own fields of a ${name}`);
        checkSymbols(`a ${name}`, object);
      }
      await mapping.unmap().wait();
      svm.release();
    } else {
      for (const [name, object] of Object.entries(objects)) {
        assert.deepEqual(Object.getOwnPropertyNames(object).sort(), instances[name], `own fields of a ${name}`);
        checkSymbols(`a ${name}`, object);
      }
    }
    await queue.finish();
  });
});
