// Parts of test/fixtures/async-callback-reentry.ts "reenter", one at a time, to find which one
// keeps a process from exiting on a driver (run through test/device/one.sh). argv: variant, rounds.
//   destructor  destructor callbacks that create a buffer, enqueue a write and wait on it
//   svm         onFree that enqueues a second free on its own queue, releases that queue and its event
//   svm-after   the same, the inner queues released after everything completed
//   svm-plain   an inner queue per round, a free with an empty onFree, waited, the queue released
//   queues      an inner queue per round, created and released, nothing enqueued
//   userevent   ctx.createUserEvent().release() per round (the fixture does it in its destructors)
//   raw-userevent         the same through the raw bindings (clCreateUserEvent, clReleaseEvent), no status set
//   raw-userevent-failed  the same, failed first with clSetUserEventStatus(-14)
// Prints the context's CL_CONTEXT_REFERENCE_COUNT and memlife's live objects before releasing it.
import process from "node:process";
import { cl } from "../../src/mod.ts";

const variant = process.argv[2] ?? "svm";
const rounds = Number(process.argv[3] ?? 200);
const ctx = cl.createContext();
const queue = ctx.createCommandQueue();
const done: Promise<unknown>[] = [];
const inner: cl.CommandQueue[] = [];

for (let i = 0; i < rounds; i++) {
  if (variant === "destructor") {
    const buf = ctx.createBuffer(256);
    buf.setDestructorCallback(() => {
      const again = ctx.createBuffer(128);
      const w = queue.enqueueWriteBuffer(again, new Uint8Array(128));
      done.push(w.wait().then(() => w.release()));
      again.release();
    });
    done.push(buf.destroyed);
    buf.release();
  } else if (variant === "svm" || variant === "svm-after") {
    const q = ctx.createCommandQueue();
    const event = q.enqueueSVMFree([ctx.svmAlloc(64)], {
      onFree: (q) => {
        const next = q.enqueueSVMFree([ctx.svmAlloc(64)], { onFree: () => {} });
        done.push(next.wait().then(() => next.release()));
        if (variant === "svm") {
          q.release();
          event.release();
        }
      },
    });
    done.push(event.wait());
    if (variant === "svm-after") inner.push(q), done.push(event.wait().then(() => event.release()));
  } else if (variant === "svm-plain") {
    const q = ctx.createCommandQueue();
    const event = q.enqueueSVMFree([ctx.svmAlloc(64)], { onFree: () => {} });
    done.push(event.wait().then(() => (event.release(), q.release())));
  } else if (variant === "userevent") {
    ctx.createUserEvent().release();
  } else if (variant.startsWith("raw-userevent")) {
    const lib = cl.library().symbols;
    const h = lib.clCreateUserEvent(ctx.unsafeHandle, null);
    if (variant === "raw-userevent-failed") lib.clSetUserEventStatus(h, -14);
    lib.clReleaseEvent(h);
  } else if (variant === "queues") {
    ctx.createCommandQueue().release();
  }
}
// Completion callbacks may push more promises while the first ones settle.
for (let n = 0; n !== done.length;) {
  n = done.length;
  await Promise.all(done);
}
for (const q of inner) q.release();
await queue.finish();
queue.release();
await new Promise((r) => setTimeout(r, 200));
console.log(`${variant}: context reference count ${ctx.referenceCount}, live objects ${ctx.liveObjects}`);
ctx.release();
console.log("ok");
