// vitest on Bun, Deno and Node. test/all.ts runs one vitest process per spec file and runtime (see
// there why); `npx vitest`, `npm run test:watch` and IDEs use this file as it is.
import { fork } from "node:child_process";
import { defineConfig } from "vitest/config";

const onBun = (globalThis as { Bun?: unknown }).Bun !== undefined;
const onDeno = (globalThis as { Deno?: unknown }).Deno !== undefined;
// package.json's "#ffi" import picks the backend by export condition; Vite resolves it with its own
// list, which names no runtime: add the one we run on (src/backend.ts refuses a mismatch).
const conditions = [onBun ? "bun" : onDeno ? "deno" : "node", "import", "module", "default"];

// Every spec file runs on the main thread of a process of its own (the forks pool), as a user's
// program does: memlife's main-thread paths are what the suite tests on every runtime. Bun's IPC
// channel has no ref()/unref(), which vitest calls on the channel of its watchdog process (vitest
// 5.1: "child.channel?.unref is not a function"); until it has, the channel's class gets no-ops,
// found on a child forked for the purpose (it exits at once). Through stop 41 Bun ran every file in
// a worker thread instead (the threads pool, with MEMLIFE_ALLOW_WORKERS=1), so its in-process
// specs tested the Worker paths and never the main thread's (test/promises.md, D13).
if (onBun) {
  const probe = fork("/dev/null", [], { stdio: ["ignore", "ignore", "ignore", "ipc"] });
  const channel = Object.getPrototypeOf(probe.channel) as { ref?: () => void; unref?: () => void };
  channel.ref ??= () => {};
  channel.unref ??= () => {};
  probe.on("error", () => {});
  probe.unref();
}

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions, externalConditions: conditions } },
  test: {
    // test/all.ts sets MEMLIFE_TEST_FIXTURES to run the spec files that fail on purpose (the
    // meta-test in test/suite.spec.ts); they are never part of the suite.
    include: process.env.MEMLIFE_TEST_FIXTURES ? ["test/fixtures/suite/*.spec.ts"] : ["test/**/*.spec.ts"],
    exclude: process.env.MEMLIFE_TEST_FIXTURES ? [] : ["test/fixtures/**", "node_modules/**"],
    // Each file gets a process of its own, on its main thread (see the Bun shim above).
    pool: "forks",
    // One file at a time: the native libraries' thread pools are shared by the whole machine, and
    // parallel files would make the timing and thread tests flaky.
    fileParallelism: false,
    // For helpers.gc(); Deno's fork() takes the flag as Node spells it. Bun has Bun.gc.
    execArgv: onBun ? [] : ["--expose-gc"],
    testTimeout: 10_000,
    hookTimeout: 60_000,
  },
});
