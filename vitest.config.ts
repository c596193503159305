// vitest on Bun, Deno and Node. test/all.ts runs one vitest process per spec file and runtime (see
// there why); `npx vitest`, `npm run test:watch` and IDEs use this file as it is.
import { defineConfig } from "vitest/config";

const onBun = (globalThis as { Bun?: unknown }).Bun !== undefined;
const onDeno = (globalThis as { Deno?: unknown }).Deno !== undefined;
// package.json's "#ffi" import picks the backend by export condition; Vite resolves it with its own
// list, which names no runtime: add the one we run on (src/backend.ts refuses a mismatch).
const conditions = [onBun ? "bun" : onDeno ? "deno" : "node", "import", "module", "default"];

// On Bun every spec file runs in a worker thread (the threads pool), where memlife refuses what a
// terminated Worker would crash on; vitest lets its workers finish, which is what the variable
// promises. runScript() takes it away from the child processes that test the refusals.
if (onBun) process.env.MEMLIFE_ALLOW_WORKERS ??= "1";

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions, externalConditions: conditions } },
  test: {
    // test/all.ts sets MEMLIFE_TEST_FIXTURES to run the spec files that fail on purpose (the
    // meta-test in test/suite.spec.ts); they are never part of the suite.
    include: process.env.MEMLIFE_TEST_FIXTURES ? ["test/fixtures/suite/*.spec.ts"] : ["test/**/*.spec.ts"],
    exclude: process.env.MEMLIFE_TEST_FIXTURES ? [] : ["test/fixtures/**", "node_modules/**"],
    // Bun's child processes lack what the forks pool needs (`child.channel.unref`, vitest 5.1);
    // its worker threads run every spec file. Elsewhere each file gets a process of its own.
    pool: onBun ? "threads" : "forks",
    // One file at a time: the native libraries' thread pools are shared by the whole machine, and
    // parallel files would make the timing and thread tests flaky.
    fileParallelism: false,
    // For helpers.gc(); Deno's fork() takes the flag as Node spells it. Bun has Bun.gc.
    execArgv: onBun ? [] : ["--expose-gc"],
    testTimeout: 10_000,
    hookTimeout: 60_000,
  },
});
