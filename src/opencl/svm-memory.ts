/**
 * ArrayBuffers over SVM memory (an allocation's `arrayBuffer`, a mapping's), each to its
 * allocation. One the program still holds keeps its allocation (and mapping) from the safety net,
 * which would otherwise free the memory under it; a command or a `hostPtr: "use"` buffer given a
 * view of one counts as a use of the allocation, so that its `release()` waits, as for a command
 * that names the allocation itself, and `enqueueSVMFree` refuses an allocation under such a buffer.
 * Each was a crash (SIGSEGV) on all three runtimes.
 */
import { viewBuffer } from "../../ffi/views.ts";
import { classes } from "./classes.ts";
import { holdsMemory, unuseSVM, useSVM } from "../internal.ts";
import { checkFreedMemory } from "../check.ts";
import { ReleasedError } from "../errors.ts";
import type { SVMAllocation } from "./svm.ts";

// Classes this module cannot import (see classes.ts), read at each call.
const cls = classes;

/** Each ArrayBuffer's allocation, and what it keeps alive: the allocation, or the mapping it came from. */
const owners = new WeakMap<ArrayBufferLike, { allocation: SVMAllocation; keeps: object }>();
/** No lookup at all until the program asked for SVM memory as an ArrayBuffer. */
let anyMade = false;
/**
 * Each view asked about, to its ArrayBuffer's entry in `owners` (null: none). A view's ArrayBuffer
 * never changes, and an ArrayBuffer is in `owners` from its making or never, so the answer holds
 * for the view's life: asked again (a host view reused buffer after buffer), one lookup instead of
 * the engine's `buffer` accessor, a DataView test and a lookup.
 */
const ownerOfView = new WeakMap<ArrayBufferView, { allocation: SVMAllocation; keeps: object } | null>();

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
  if (!anyMade) checkFreedMemory(allocationBehind);
  anyMade = true;
  return buffer;
}

/**
 * The allocation whose memory `view` is, if any. A view of an allocation's memory kept after the
 * program released the allocation, or handed it to `enqueueSVMFree`, is a ReleasedError: no native
 * call may take it (memlife cannot detach the views it handed out). Taken, a read or write touched
 * freed memory, given back to the system (SIGSEGV) or to the next allocation (a silent wrong
 * answer). Asked of every view native code is given (`memoryBytes`), and again right before a
 * command pins the allocations behind its views.
 */
export function allocationBehind(view: ArrayBufferView): SVMAllocation | undefined {
  if (!anyMade) return undefined;
  let owner = ownerOfView.get(view);
  if (owner === undefined) {
    owner = owners.get(viewBuffer(view)) ?? null;
    ownerOfView.set(view, owner);
  }
  const allocation = owner?.allocation;
  if (allocation !== undefined && !cls.SVMAllocation[holdsMemory](allocation)) {
    throw new ReleasedError(
      "SVMAllocation behind this view (released, or handed to enqueueSVMFree: its memory is not the program's any more)",
    );
  }
  return allocation;
}

/**
 * `svm` with the allocations behind the host views a command uses (one view, or a list). Called
 * before the native call, with every other argument: it runs the engine's view accessors, which a
 * program can reach (`DataView[Symbol.hasInstance]`), and nothing of that may run after a command
 * was enqueued (its pin would be lost: the driver then wrote into collected memory).
 */
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

/** Per `hostPtr: "use"` buffer (its destructor entry), the allocation whose memory it is. */
const holds = new WeakMap<object, SVMAllocation>();
/** Allocations under `hostPtr: "use"` buffers, and how many: enqueueSVMFree refuses them. */
const heldCount = new WeakMap<SVMAllocation, number>();
/** No lookup at all on the hot paths (a free, a buffer's let-go) until a buffer held an allocation. */
let anyHeld = false;

/**
 * A `hostPtr: "use"` buffer (`key`, its destructor entry) was created over `allocation`'s memory
 * (`allocationBehind`, asked before the native create): in use until `letGo`.
 */
export function holdAllocation(key: object, allocation: SVMAllocation): void {
  cls.SVMAllocation[useSVM](allocation); // through the class: an allocation given another prototype too
  anyHeld = true;
  holds.set(key, allocation);
  heldCount.set(allocation, (heldCount.get(allocation) ?? 0) + 1);
}

/** The buffer `key` let go of its memory: by the key, no view looked at again. */
export function letGoAllocation(key: object): void {
  if (!anyHeld) return;
  const allocation = holds.get(key);
  if (allocation === undefined) return;
  holds.delete(key);
  const left = heldCount.get(allocation)! - 1;
  if (left === 0) heldCount.delete(allocation);
  else heldCount.set(allocation, left);
  cls.SVMAllocation[unuseSVM](allocation);
}

/** Whether a `hostPtr: "use"` buffer is over `allocation`'s memory (enqueueSVMFree would free it under that buffer). */
export function heldByBuffer(allocation: SVMAllocation): boolean {
  return anyHeld && heldCount.has(allocation);
}
