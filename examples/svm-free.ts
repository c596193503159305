/**
 * Shared virtual memory (OpenCL 2.0) freed in queue order with `enqueueSVMFree`, and `onFree`
 * told when it happened, with the allocations it was given.
 *
 *   bun svm-free.ts
 *   deno run --allow-ffi --allow-env svm-free.ts
 *   node svm-free.ts                       (Node 22.18 or newer)
 */
import { cl, ReleasedError } from "memlife";

const ctx = cl.createContext();
const device = ctx.devices[0];
if (device === undefined || !device.svm.coarseGrainBuffer) {
  console.log(`${device?.name ?? "this device"} has no shared virtual memory (it needs OpenCL 2.0)`);
  ctx.release();
} else {
  const queue = ctx.createCommandQueue();
  const fineGrain = device.svm.fineGrainBuffer; // fine grain: the host reads and writes it directly
  const allocs = Array.from({ length: 8 }, () => ctx.svmAlloc(4096, { fineGrain }));
  if (fineGrain) new Uint8Array(allocs[0]!.arrayBuffer).fill(7);

  let freed: cl.SVMAllocation[] = [];
  const event = queue.enqueueSVMFree(allocs, {
    onFree: (_queue, list) => {
      freed = list; // the same allocations, in the same order; the queue is still usable here
    },
  });
  await event.wait(); // the command completed and onFree ran

  const inOrder = freed.length === allocs.length && freed.every((a, i) => a === allocs[i]);
  let stale = false;
  try {
    void allocs[0]!.address;
  } catch (error) {
    stale = error instanceof ReleasedError; // a freed allocation is never freed twice
  }
  queue.release();
  ctx.release();
  console.log(
    `onFree ran for ${freed.length} allocations (in order: ${inOrder}); reuse throws ReleasedError: ${stale}`,
  );
  if (!inOrder || !stale) throw new Error("unexpected SVM free outcome");
}
