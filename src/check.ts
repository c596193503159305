/**
 * The argument checks every public call shares, so that bad input never reaches C: Bun and koffi
 * wrap an out-of-range integer silently (2 ** 32 + 1 becomes 1 as a cl_uint), a name looked up in
 * a plain table finds "toString", and a view whose memory moved or shrank is a crash once native
 * code writes into it. Each check throws TypeError (wrong kind of value) or RangeError (right kind,
 * wrong value) with a message that says what was expected, before any native call.
 */

import {
  builtin,
  dataViewBuffer,
  dataViewLength,
  detached,
  isDataView,
  isShared,
  typedArrayBuffer,
  typedArrayLength,
  typedArrayPrototype,
  viewBuffer,
} from "../ffi/views.ts";
export { isDetached, viewBuffer, viewByteLength } from "../ffi/views.ts";

/** The range of each C integer type memlife passes. 64-bit types stop at 2^53 - 1: numbers are exact up to there. */
export const CInt = Object.freeze({
  cl_int: { min: -(2 ** 31), max: 2 ** 31 - 1 },
  cl_uint: { min: 0, max: 2 ** 32 - 1 },
  /** size_t, cl_ulong and cl_bitfield (cl_device_type, cl_mem_flags). */
  size_t: { min: 0, max: Number.MAX_SAFE_INTEGER },
  /** A C `int` enum such as RTCDeviceProperty. */
  int: { min: -(2 ** 31), max: 2 ** 31 - 1 },
  /** A C `unsigned int` such as a ray mask. */
  unsigned: { min: 0, max: 2 ** 32 - 1 },
});
export type CIntType = keyof typeof CInt;

/** A value as a message shows it: strings quoted, bigints with their n, -0 as -0. */
export function show(value: unknown): string {
  switch (typeof value) {
    case "string":
      return JSON.stringify(value.length > 40 ? value.slice(0, 40) + "..." : value);
    case "bigint":
      return `${value}n`;
    case "number":
      return Object.is(value, -0) ? "-0" : String(value);
    case "function":
      return "a function";
    case "symbol":
      return value.toString();
    case "object":
      if (value === null) return "null";
      if (Array.isArray(value)) return "an array";
      return `an object (${Object.prototype.toString.call(value).slice(8, -1)})`;
    default:
      return String(value);
  }
}

/**
 * `value` as an integer of C type `type`, within [`min`, `max`] when given (narrower than the type).
 * TypeError unless it is a number (a bigint, a string or a boolean is not); RangeError for NaN,
 * Infinity, a fraction or a value out of range. -0 comes back as 0.
 * @example integer(options.offset, "size_t", "offset")
 */
export function integer(value: unknown, type: CIntType, what: string, min?: number, max?: number): number {
  const lo = min ?? CInt[type].min;
  const hi = max ?? CInt[type].max;
  // The messages are built out of line: inlined, this is a few compares, and the bytecode V8
  // counts against its budget for inlining the caller (an SVM allocation's constructor) stays small.
  if (typeof value !== "number" || !Number.isInteger(value) || value < lo || value > hi) {
    throw notInteger(value, type, what, lo, hi);
  }
  return value === 0 ? 0 : value;
}

/** What `integer` throws for `value`. */
function notInteger(value: unknown, type: CIntType, what: string, lo: number, hi: number): Error {
  return typeof value !== "number"
    ? new TypeError(`${what} must be a number (${type}), got ${show(value)}`)
    : new RangeError(`${what} must be an integer from ${lo} to ${hi} (${type}), got ${show(value)}`);
}

/** `value` as a boolean, `fallback` when undefined; anything else (1, "no", null) is a TypeError. */
export function boolean(value: unknown, what: string, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== "boolean") throw new TypeError(`${what} must be true or false, got ${show(value)}`);
  return value;
}

/**
 * The entry of `table` named by `value`, looked up as an own property only ("toString",
 * "__proto__" and "constructor" name nothing). `undefined` gives `fallback`.
 */
export function member<T>(table: Readonly<Record<string, T>>, value: unknown, what: string, fallback: T): T {
  if (value === undefined) return fallback;
  if (typeof value !== "string" || !Object.hasOwn(table, value)) {
    throw new TypeError(
      `${what} must be one of ${Object.keys(table).map((k) => JSON.stringify(k)).join(", ")}, got ${show(value)}`,
    );
  }
  return table[value];
}

/**
 * A table for `member`: frozen, read with `Object.hasOwn` so that nothing inherited resolves. It
 * keeps Object.prototype: V8 holds a prototype-free object in dictionary mode, where each lookup
 * costs 10–20 ns more (bench/parts.ts, `hostPtr: "use"`).
 */
export function names<T>(entries: Record<string, T>): Readonly<Record<string, T>> {
  return Object.freeze({ ...entries });
}

/**
 * An options bag: `undefined`, or a plain object (`{...}` or `Object.create(null)`) whose own
 * enumerable keys are all in `keys` (a misspelt option is a TypeError, not silently ignored).
 * Read its values with `own()`, so that nothing inherited counts.
 */
export function options<K extends string>(
  value: unknown,
  keys: Readonly<Record<K, true>>,
  what: string,
): Partial<Record<K, unknown>> | undefined {
  if (value === undefined) return undefined;
  const bag = plainObject(value, keys, what);
  for (const key in bag) {
    // Enumerable keys inherited from a tampered Object.prototype are not the caller's options.
    if (!Object.hasOwn(keys, key) && Object.hasOwn(bag, key)) throw unknownOption(key, keys, what);
  }
  return bag as Partial<Record<K, unknown>>;
}

/**
 * `value` if it is a plain object (`{...}` or `Object.create(null)`), else the TypeError of
 * `options()`. Its
 * options count as own properties only, and hot paths ask for one as
 *   "key" in bag && (!("key" in Object.prototype) || Object.hasOwn(bag, "key"))
 * written out with the key as a literal at each place: `in` is an inline-cached lookup (under 1 ns
 * on V8, and false for the usual missing key), `Object.hasOwn` a call (7–8 ns on V8; bench/
 * js-cost.ts). Asked in a shared function, the one `in` site sees every key and V8 gives up on it
 * (16 ns a key). The plain prototype is what makes `in` answer for own properties.
 */
export function plainObject(
  value: unknown,
  keys: Readonly<Record<string, true>>,
  what: string,
): Record<string, unknown> {
  // Small enough for V8 to inline into every call that takes options (the throws are out of line).
  if (typeof value === "object" && value !== null) {
    const proto = Object.getPrototypeOf(value);
    if (proto === Object.prototype || proto === null) return value as Record<string, unknown>;
  }
  throw notPlain(value, keys, what);
}

function notPlain(value: unknown, keys: Readonly<Record<string, true>>, what: string): TypeError {
  return typeof value !== "object" || value === null
    ? new TypeError(`${what} must be an object ${expected(keys)} or undefined, got ${show(value)}`)
    : new TypeError(`${what} must be a plain object ${expected(keys)}, got ${show(value)}`);
}

/** The TypeError for an own key of an options bag that is not one of its `keys`. */
export function unknownOption(key: string, keys: Readonly<Record<string, true>>, what: string): TypeError {
  return new TypeError(`${what} has no option ${JSON.stringify(key)}; the options are ${expected(keys)}`);
}

function expected(keys: Readonly<Record<string, true>>): string {
  return `{ ${Object.keys(keys).map((k) => `${k}?`).join(", ")} }`;
}

/** The set of keys an options bag may have, for `options()`. */
export function keys<K extends string>(...list: K[]): Readonly<Record<K, true>> {
  return names(Object.fromEntries(list.map((k) => [k, true]))) as Readonly<Record<K, true>>;
}

/** `bag[key]` if it is the bag's own property, else undefined (an inherited getter never runs). */
export function own<K extends string>(bag: Partial<Record<K, unknown>> | undefined, key: K): unknown {
  return bag !== undefined && Object.hasOwn(bag, key) ? bag[key] : undefined;
}

const arrayBufferResizable = builtin(ArrayBuffer.prototype, "resizable");
const sharedGrowable = builtin(SharedArrayBuffer.prototype, "growable");

const typedArrayName = builtin(typedArrayPrototype, Symbol.toStringTag)!;
const typedArrayOffset = builtin(typedArrayPrototype, "byteOffset")!;
const typedArrayCount = builtin(typedArrayPrototype, "length")!;

/**
 * A view of `value`'s memory of memlife's own, made without running any of the program's code (a
 * typed array can also be given another one's prototype): its length is the array's real one, so
 * the size given to native code, the checks and the copy agree. TypeError unless `value` is a
 * typed array of kind `name`, or if its ArrayBuffer is detached.
 */
export function ownView<T extends Float32Array | Uint32Array>(
  value: unknown,
  type: { new (buffer: ArrayBufferLike, byteOffset: number, length: number): T },
  name: "Float32Array" | "Uint32Array",
  what: string,
): T {
  if (typedArrayName.call(value) !== name) throw new TypeError(`${what} must be a ${name}, got ${show(value)}`);
  try {
    return new type(
      typedArrayBuffer.call(value) as ArrayBufferLike,
      typedArrayOffset.call(value) as number,
      typedArrayCount.call(value) as number,
    );
  } catch {
    // Only a detached ArrayBuffer makes the view fail: the offset and length are the array's own.
    throw new TypeError(
      `${what}'s ArrayBuffer is detached (transferred away, or a WebAssembly.Memory that grew): native code cannot use it`,
    );
  }
}

/** Whether the view's memory can shrink or move: a resizable ArrayBuffer or a growable SharedArrayBuffer. */
export function isResizable(view: ArrayBufferView): boolean {
  return resizable(viewBuffer(view));
}

function resizable(buffer: ArrayBufferLike): boolean {
  const accessor = isShared(buffer) ? sharedGrowable : arrayBufferResizable;
  return accessor !== undefined && accessor.call(buffer) === true;
}

/**
 * Typed arrays found pinnable: a view's ArrayBuffer, and whether it can resize or grow, never
 * change, and a detached one reads 0 bytes (checked in full again). So the same memory given again,
 * as a program reuses a `hostPtr: "use"` buffer's host memory once it was destroyed, skips the
 * buffer's accessors: 35-40 ns a buffer on Bun (bench/parts.ts --part=hostptr).
 */
const pinnable = new WeakSet<ArrayBufferView>();

/**
 * Set once memory that can be freed under a view exists (SVM memory as an ArrayBuffer,
 * src/opencl/svm-memory.ts): throws for a view of memory the program gave up. Until then, one
 * read of an `undefined` per view.
 */
let freedMemoryCheck: ((view: ArrayBufferView) => void) | undefined;
export function checkFreedMemory(check: (view: ArrayBufferView) => void): void {
  freedMemoryCheck = check;
}

/**
 * The length in bytes of `value`, an ArrayBufferView native code may read or write, as the engine
 * knows it. TypeError for anything else, and for a view whose ArrayBuffer is detached. `pinned`:
 * native code keeps the pointer after the call returns (hostPtr "use", an enqueued read or write),
 * so the memory must not be able to shrink or move either: resizable ArrayBuffers and growable
 * SharedArrayBuffers are refused. Reading the view's buffer here also gives an on-heap typed array
 * the stable memory its pointer needs. Call it after every getter of the call's other arguments
 * ran: a getter may resize or detach the view. `freedChecked`: the caller asked already for the
 * SVM allocation behind this view (`allocationBehind`, which throws for freed memory), so the check
 * is not made twice (asked twice, a `hostPtr: "use"` buffer cost 35-65 ns more once SVM memory was
 * viewed as an ArrayBuffer: bench/parts.ts --part=hostptr --svm-viewed).
 */
export function memoryBytes(value: unknown, what: string, pinned: boolean, freedChecked = false): number {
  if (!ArrayBuffer.isView(value)) throw notMemory(value, what);
  if (freedMemoryCheck !== undefined && !freedChecked) freedMemoryCheck(value);
  // Each accessor once (3-9 ns each on V8, bench/js-cost.ts "hostPtr memlife"): a detached typed
  // array reads 0 bytes, so one that has bytes needs no detached check. Before `isDataView`: only
  // typed arrays are remembered, and on Bun its getter cost a hostPtr "use" loop 8% of its time.
  if (pinned && pinnable.has(value)) {
    const length = typedArrayLength.call(value) as number;
    if (length !== 0) return length;
  }
  if (isDataView(value)) return dataViewBytes(value, what, pinned);
  const buffer = typedArrayBuffer.call(value) as ArrayBufferLike;
  const length = typedArrayLength.call(value) as number;
  if (length === 0 && detached(value, buffer)) throw detachedMemory(what);
  if (pinned) {
    if (resizable(buffer)) throw movableMemory(what);
    pinnable.add(value);
  }
  return length;
}

// Out of line: the typed array path stays small enough for V8 to inline into its callers.
function dataViewBytes(view: DataView, what: string, pinned: boolean): number {
  const buffer = dataViewBuffer.call(view) as ArrayBufferLike;
  if (detached(view, buffer)) throw detachedMemory(what);
  if (pinned && resizable(buffer)) throw movableMemory(what);
  return dataViewLength.call(view) as number;
}

// The errors out of line: `memoryBytes` stays small enough for V8 to inline into its callers.
function notMemory(value: unknown, what: string): TypeError {
  return new TypeError(`${what} must be an ArrayBufferView (a typed array or DataView), got ${show(value)}`);
}
function detachedMemory(what: string): TypeError {
  return new TypeError(
    `${what}'s ArrayBuffer is detached (transferred away, or a WebAssembly.Memory that grew): native code cannot use it`,
  );
}
function movableMemory(what: string): TypeError {
  return new TypeError(
    `${what} must not be a view of a resizable ArrayBuffer or a growable SharedArrayBuffer: native code keeps its address, which resizing would invalidate`,
  );
}

/**
 * `list.length`, read once: an integer from 0 to 2^32 - 1, as every array's is. Only a Proxy can
 * answer anything else, and no such answer may reach C (a boolean became a count of 1 on Bun and a
 * raw FFI error on Node and Deno) nor an engine's own "Invalid array length".
 */
export function listLength(list: readonly unknown[], what: string): number {
  const n: unknown = list.length;
  if (typeof n !== "number" || n >>> 0 !== n) {
    throw new TypeError(`${what} has a length no array has (an integer from 0 to 2^32 - 1), got ${show(n)}`);
  }
  return n;
}

/** `value` if it is a function, else a TypeError saying what it should be. */
export function callable<F>(value: unknown, what: string, shape: string): F {
  if (typeof value !== "function") throw new TypeError(`${what} must be a function ${shape}, got ${show(value)}`);
  return value as F;
}

/** An optional size_t (an offset, a byte count): `fallback` when undefined, else checked as `integer` does. */
export function sizeOr(value: unknown, what: string, fallback: number): number {
  return value === undefined ? fallback : integer(value, "size_t", what);
}

/**
 * Defines `key` on `object` as a read-only, enumerable own property (a context's `devices`, a
 * queue's `device`, a kernel's `name`, `numArgs` and `program`: memlife trusts them). The
 * descriptor has no prototype: `Object.defineProperty` reads `get`, `set`, `writable` and
 * `configurable` through the prototype chain, and an object literal's would find a patched
 * Object.prototype's (an inherited `get` made each constructor throw after its native create, and
 * the handle leaked; an inherited `writable` left the property assignable).
 */
export function readOnly(object: object, key: string, value: unknown): void {
  const descriptor = Object.create(null) as PropertyDescriptor;
  descriptor.value = value;
  descriptor.enumerable = true;
  Object.defineProperty(object, key, descriptor);
}
