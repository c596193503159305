/**
 * Runs ONE spec file in the current runtime:
 *   bun test/run.ts F | deno run -A --v8-flags=--expose-gc test/run.ts F | node --expose-gc test/run.ts F
 * Tests run one at a time, each with its time limit. Prints one line per test, then
 *   @@result {"passed":N,"failed":N,"skipped":N}
 * and exits explicitly (code 1 if anything failed), so a leaked handle cannot hang the run.
 * test/all.ts reads `@@plan` (the test names) and the `ok|FAIL|skip k/N` lines to count what
 * did not finish when a file hangs or crashes.
 */
import { resolve } from "node:path";
import process from "node:process";
import { pathToFileURL } from "node:url";
import { inspect } from "node:util";
import { registry, SkipSignal, type TestFn } from "./harness.ts";

const file = process.argv[2];
if (!file) {
  console.error("usage: <runtime> test/run.ts path/to/file.spec.ts");
  process.exit(2);
}

let passed = 0;
let failed = 0;
let skipped = 0;

/** The error itself, its stack and extra fields (AssertionError's diff, OpenCLError's code), indented. */
function describeError(error: unknown): string {
  const text = error instanceof Error ? inspect(error, { depth: 4 }) : `thrown: ${inspect(error)}`;
  return text.replace(/^/gm, "    ");
}

// An error nobody awaits (a callback that throws, a forgotten promise) fails the test in progress
// instead of killing the runner; between tests it counts as a failure of its own.
let stray: ((error: unknown) => void) | undefined;
function onStray(error: unknown): void {
  if (stray) return stray(error);
  failed++;
  console.log(`FAIL (an error outside any test)\n${describeError(error)}`);
}

type Outcome = { ok: true } | { ok: false; error: unknown };

/** Runs `fn` until it settles, throws asynchronously, or `ms` pass. A timed-out test is left running. */
function attempt(fn: TestFn, ms: number): Promise<Outcome> {
  return new Promise<Outcome>((settle) => {
    const timer = setTimeout(() => settle({ ok: false, error: new Error(`timed out after ${ms} ms`) }), ms);
    const done = (outcome: Outcome) => {
      clearTimeout(timer);
      stray = undefined;
      settle(outcome);
    };
    stray = (error) => done({ ok: false, error });
    // Promise.resolve().then(fn): a synchronous throw becomes a rejection too.
    Promise.resolve()
      .then(fn)
      .then(() => done({ ok: true }), (error) => done({ ok: false, error }));
  });
}

try {
  await import(pathToFileURL(resolve(file)).href);
} catch (error) {
  console.log(`FAIL (loading ${file}; the error is on stderr)`);
  console.log(`@@result ${JSON.stringify({ passed: 0, failed: 1, skipped: 0 })}`);
  // Left uncaught, so that the runtime prints it, exits 1, and shows where a SyntaxError is
  // (Node keeps the file:line of a SyntaxError out of its .stack).
  throw error;
}
process.on("uncaughtException", onStray);
process.on("unhandledRejection", onStray);

const { tests } = registry;
const n = tests.length;
console.log(`@@plan ${JSON.stringify(tests.map((t) => t.name))}`);

let beforeError: Outcome | undefined;
for (const hook of registry.before) {
  const outcome = await attempt(hook, 60_000);
  if (!outcome.ok) {
    beforeError = outcome;
    console.log(`FAIL (before)\n${describeError(outcome.error)}`);
    break;
  }
}

for (const [i, t] of tests.entries()) {
  const label = `${i + 1}/${n} ${t.name}`;
  if (beforeError) {
    failed++;
    console.log(`FAIL ${label}: not run, before() failed`);
    continue;
  }
  registry.skipReason = undefined;
  const start = performance.now();
  const outcome = await attempt(t.fn, t.timeout);
  const ms = Math.round(performance.now() - start);
  const skipReason = registry.skipReason ?? (!outcome.ok && outcome.error instanceof SkipSignal ? outcome.error.message : undefined);
  if (skipReason !== undefined) {
    skipped++;
    console.log(`skip ${label}: ${skipReason}`);
  } else if (outcome.ok) {
    passed++;
    console.log(`ok   ${label} (${ms} ms)`);
  } else {
    failed++;
    console.log(`FAIL ${label} (${ms} ms)\n${describeError(outcome.error)}`);
  }
}

for (const hook of registry.after) {
  const outcome = await attempt(hook, 60_000);
  if (!outcome.ok) {
    failed++;
    console.log(`FAIL (after)\n${describeError(outcome.error)}`);
  }
}

console.log(`@@result ${JSON.stringify({ passed, failed, skipped })}`);
process.exit(failed > 0 ? 1 : 0);
