/**
 * A view's memory as the engine knows it, through the built-in accessors, called directly: a
 * subclass, or the view itself (`Object.defineProperty`), can override `buffer` and `byteLength`,
 * and a getter of the program's that ran there could release or detach what a native call is about
 * to use, or lie about the size native code may touch. Shared by the backends' `pointerOf` and the
 * core's argument checks (src/check.ts).
 */
export type Getter = (this: unknown) => unknown;
/** The built-in getter `name` of `proto` (undefined where the engine lacks it). */
export function builtin(proto: object, name: PropertyKey): Getter | undefined {
  return Object.getOwnPropertyDescriptor(proto, name)?.get as Getter | undefined;
}
export const typedArrayPrototype = Object.getPrototypeOf(Uint8Array.prototype) as object;
export const typedArrayBuffer: Getter = builtin(typedArrayPrototype, "buffer")!;
export const typedArrayLength: Getter = builtin(typedArrayPrototype, "byteLength")!;
export const dataViewBuffer: Getter = builtin(DataView.prototype, "buffer")!;
export const dataViewLength: Getter = builtin(DataView.prototype, "byteLength")!;
const typedArrayOffset: Getter = builtin(typedArrayPrototype, "byteOffset")!;
const dataViewOffset: Getter = builtin(DataView.prototype, "byteOffset")!;
export const arrayBufferDetached: Getter | undefined = builtin(ArrayBuffer.prototype, "detached");
export const arrayBufferLength: Getter = builtin(ArrayBuffer.prototype, "byteLength")!;

const typedArrayTag: Getter = builtin(typedArrayPrototype, Symbol.toStringTag)!;

/**
 * Whether `view` (an ArrayBufferView) is a DataView rather than a typed array, asked of the
 * engine: %TypedArray%.prototype's toStringTag getter reads undefined for anything else and runs
 * none of the program's code. Not `instanceof`: it walks the prototype chain, and a Proxy there
 * (`Object.setPrototypeOf(view, new Proxy(...))`) runs its getPrototypeOf trap, the program's
 * code, in the middle of a native call's checks (one that released the queue or a buffer there
 * had PoCL abort, or SIGSEGV: test/fixtures/robust-prototype-traps.ts).
 */
export function isDataView(view: ArrayBufferView): view is DataView {
  return typedArrayTag.call(view) === undefined;
}

/**
 * Whether `buffer` is a SharedArrayBuffer, asked of the engine: ArrayBuffer.prototype's byteLength
 * getter throws for one. Not `instanceof`, for the reason `isDataView` gives.
 */
export function isShared(buffer: ArrayBufferLike): boolean {
  try {
    arrayBufferLength.call(buffer);
    return false;
  } catch {
    return true;
  }
}

/** The view's ArrayBuffer, as the engine knows it. */
export function viewBuffer(view: ArrayBufferView): ArrayBufferLike {
  return (isDataView(view) ? dataViewBuffer : typedArrayBuffer).call(view) as ArrayBufferLike;
}

/** The view's length in bytes, as the engine knows it (not a getter of the program's). */
export function viewByteLength(view: ArrayBufferView): number {
  return (isDataView(view) ? dataViewLength : typedArrayLength).call(view) as number;
}

/**
 * A Uint8Array of memlife's own over `view`'s bytes, made without running any of the program's
 * code: for an API that looks at the view itself (Deno.UnsafePointer.of asks its prototype chain
 * with isPrototypeOf and reads its `length`, both of which a Proxy in the chain answers).
 */
export function ownBytes(view: ArrayBufferView): Uint8Array {
  const dataView = isDataView(view);
  return new Uint8Array(
    viewBuffer(view) as ArrayBuffer,
    (dataView ? dataViewOffset : typedArrayOffset).call(view) as number,
    (dataView ? dataViewLength : typedArrayLength).call(view) as number,
  );
}

/**
 * Whether the view's ArrayBuffer was detached (transferred, or moved by structuredClone/postMessage
 * with a transfer list). Where `ArrayBuffer.prototype.detached` is missing, an ArrayBuffer of
 * length 0 under a view that says otherwise is the sign.
 */
export function isDetached(view: ArrayBufferView): boolean {
  return detached(view, viewBuffer(view));
}

export function detached(view: ArrayBufferView, buffer: ArrayBufferLike): boolean {
  if (isShared(buffer)) return false;
  if (arrayBufferDetached !== undefined) return arrayBufferDetached.call(buffer) === true;
  if (arrayBufferLength.call(buffer) !== 0) return false;
  try {
    return viewByteLength(view) === 0; // a detached typed array reads 0
  } catch {
    return true; // a detached DataView throws
  }
}

/**
 * The backends' `pointerOf` check: TypeError for a view whose ArrayBuffer is detached, RangeError
 * for an empty one. Reading the view's buffer also gives an on-heap typed array (V8, JSC) the
 * stable memory its pointer needs.
 */
export function pointable(view: ArrayBufferView, prefix: string): void {
  if (isDetached(view)) throw new TypeError(`${prefix}pointerOf: the view's ArrayBuffer is detached`);
  if (viewByteLength(view) === 0) throw new RangeError(`${prefix}pointerOf: an empty view has no memory to point to`);
}
