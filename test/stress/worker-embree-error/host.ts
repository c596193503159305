// README, Workers: an Embree error raised after a Worker was terminated. It is reachable with no
// monitor, budget or accounting, nothing MEMLIFE_ALLOW_WORKERS lifts: Workers whose commits raise
// an Embree error (guest.ts), each terminated 0-2 ms after it started them. Embree then calls the
// error function, a callback of the terminated Worker, on the commit's thread. 2026-11-28, 2-vCPU
// VM, runs of 15 terminations each: Bun SIGSEGV in 3 runs of 6, Deno SIGSEGV in 5 of 6, Node 0 of
// 6. Since Bun's Worker relay keeps that call in C for the Worker to take (ffi/bun-relay.c,
// MODE_KEPT), Bun 0 of 5; since a Deno Worker's device without accounting commits on the Worker's
// thread (src/worker.ts, commitOnWorkerThread), Deno 0 of 6. workers.spec runs it on all three.
//   bun test/stress/worker-embree-error/host.ts [terminations]          (prints "ok", or crashes)
//   deno run -A test/stress/worker-embree-error/host.ts
//   node test/stress/worker-embree-error/host.ts
import process from "node:process";

const url = new URL("./guest.ts", import.meta.url);
const g = globalThis as { Bun?: unknown; Deno?: unknown };
const runs = Number(process.argv[2] ?? 15);
for (let i = 0; i < runs; i++) {
  await new Promise<void>((resolve) => {
    if (g.Bun === undefined && g.Deno === undefined) {
      import("node:worker_threads").then(({ Worker }) => {
        const w = new Worker(url);
        w.on("message", (m) => {
          if (m === "ready") setTimeout(() => w.terminate().then(() => resolve()), i % 3);
          else resolve();
        });
      });
    } else {
      const w = new Worker(url.href, { type: "module" });
      w.addEventListener("message", (e) => {
        if ((e as MessageEvent).data !== "ready") return resolve();
        setTimeout(() => {
          w.terminate();
          resolve();
        }, i % 3);
      });
    }
  });
}
// Time for the errors of the last Worker's commits to be raised.
await new Promise((resolve) => setTimeout(resolve, 300));
console.log("ok");
