// Node + koffi 3.3.4, no memlife: a Worker terminated while koffi's native module starts in it
// aborts the whole process ("FATAL ERROR: Error::ThrowAsJavaScriptException napi_throw", SIGABRT,
// exit 134) in about half of the runs of this loop (2 of 5, and 2 of 4, 2026-11-28). napi_throw
// answers napi_pending_exception in an environment being terminated, which node-addon-api takes
// for fatal (nodejs/node-addon-api PR #902). README, "Workers". Run by hand:
//   node test/stress/koffi-worker-terminate/host.mjs   (prints "ok", or aborts)
import { Worker } from "node:worker_threads";
for (let r = 0; r < 60; r++) {
  const w = new Worker(new URL("./guest.mjs", import.meta.url));
  w.on("error", () => {});
  await new Promise((res) => setTimeout(res, Math.random() * 60));
  await w.terminate();
}
console.log("ok");
