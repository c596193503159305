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
export const arrayBufferDetached: Getter | undefined = builtin(ArrayBuffer.prototype, "detached");
export const arrayBufferLength: Getter = builtin(ArrayBuffer.prototype, "byteLength")!;

// DataView or typed array is told apart by `instanceof`, which a program can fool: then the
// other kind's accessor throws a TypeError, no more. (A try/catch around the typed array's one
// made createBuffer's path slower on Deno in 2 of 4 bench runs: 800 ns a hostPtr buffer, not 650.)

/** The view's ArrayBuffer, as the engine knows it. */
export function viewBuffer(view: ArrayBufferView): ArrayBufferLike {
  return (view instanceof DataView ? dataViewBuffer : typedArrayBuffer).call(view) as ArrayBufferLike;
}

/** The view's length in bytes, as the engine knows it (not a getter of the program's). */
export function viewByteLength(view: ArrayBufferView): number {
  return (view instanceof DataView ? dataViewLength : typedArrayLength).call(view) as number;
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
  if (buffer instanceof SharedArrayBuffer) return false;
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
