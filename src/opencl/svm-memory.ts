/**
 * ArrayBuffers over SVM memory (an allocation's `arrayBuffer`, a mapping's), each to its
 * allocation. One the program still holds keeps its allocation (and mapping) from the safety net, which would
 * otherwise free the memory under it; a command or a `hostPtr: "use"` buffer given a view of one
 * counts as a use of the allocation, so that its `release()` waits, as for a command that names
 * the allocation itself. Both were crashes (SIGSEGV) on all three runtimes.
 */
import { viewBuffer } from "../../ffi/views.ts";
import { unuseSVM, useSVM } from "../internal.ts";
import type { SVMAllocation } from "./svm.ts";

/** Each ArrayBuffer's allocation, and what it keeps alive: the allocation, or the mapping it came from. */
const owners = new WeakMap<ArrayBufferLike, { allocation: SVMAllocation; keeps: object }>();
/** No lookup at all until the program asked for SVM memory as an ArrayBuffer. */
let anyMade = false;

/**
 * `buffer`, which is `allocation`'s memory (or part of it): held, it keeps `keeps` alive (the
 * allocation, or the mapping whose range it is: a mapping dropped is unmapped by the safety net).
 */
export function svmArrayBuffer(
  buffer: ArrayBuffer,
  allocation: SVMAllocation,
  keeps: object = allocation,
): ArrayBuffer {
  owners.set(buffer, { allocation, keeps });
  anyMade = true;
  return buffer;
}

/** The allocation whose memory `view` is, if any. */
export function allocationBehind(view: ArrayBufferView): SVMAllocation | undefined {
  return anyMade ? owners.get(viewBuffer(view))?.allocation : undefined;
}

/** `svm` with the allocations behind the host views a command uses (one view, or a list). */
export function withAllocationsBehind(
  svm: SVMAllocation[] | undefined,
  host: ArrayBufferView | readonly ArrayBufferView[],
): SVMAllocation[] | undefined {
  if (!anyMade) return svm;
  const views = Array.isArray(host) ? host as readonly ArrayBufferView[] : [host as ArrayBufferView];
  for (const view of views) {
    const owner = allocationBehind(view);
    if (owner !== undefined) (svm = svm === undefined ? [] : [...svm]).push(owner);
  }
  return svm;
}

/** A `hostPtr: "use"` buffer over `view` was created: its allocation, if any, is in use until `letGo`. */
export function holdAllocationBehind(view: ArrayBufferView): void {
  allocationBehind(view)?.[useSVM]();
}

/** The buffer made by `holdAllocationBehind` let go of `view`'s memory. */
export function letGoAllocationBehind(view: ArrayBufferView): void {
  allocationBehind(view)?.[unuseSVM]();
}
