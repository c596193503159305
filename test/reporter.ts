/**
 * The vitest reporter that test/all.ts reads: one line per test and machine lines (`@@`),
 *   @@plan ["file > group > test", ...]      the tests the file will run, once collected
 *   @@case {"state":"passed|failed|skipped","name":"..."}      after each test's own line
 *   @@result {"passed":N,"failed":N,"skipped":N}      at the end of the run
 * so that a file killed at its time limit or crashed still counts what did not finish. Skips
 * print their reason: a skip is never a silent pass. Errors outside any test count as failures.
 */
import type { Reporter, SerializedError, TestCase, TestModule } from "vitest/node";

const indent = (s: string) => s.replace(/^/gm, "    ");

function describeError(e: SerializedError): string {
  const text = e.stack && e.stack.includes(e.message ?? "")
    ? e.stack
    : `${e.name ?? "Error"}: ${e.message}\n${e.stack ?? ""}`;
  const extra = e.diff ? `\n${e.diff}` : "";
  return indent(`${text.trimEnd()}${extra}`);
}

export default class SuiteReporter implements Reporter {
  private passed = 0;
  private failed = 0;
  private skipped = 0;
  private notSelected = 0;

  onTestModuleCollected(module: TestModule): void {
    const names = [...module.children.allTests()].filter((t) => t.options.mode === "run").map((t) => t.fullName);
    console.log(`@@plan ${JSON.stringify(names)}`);
  }

  onTestCaseResult(test: TestCase): void {
    const result = test.result();
    const ms = Math.round(test.diagnostic()?.duration ?? 0);
    if (result.state === "passed") {
      this.passed++;
      console.log(`ok   ${test.fullName} (${ms} ms)`);
    } else if (result.state === "failed") {
      this.failed++;
      console.log(`FAIL ${test.fullName} (${ms} ms)`);
      for (const e of result.errors ?? []) console.log(describeError(e));
    } else if (result.state === "skipped") {
      // .skip, .todo, or not selected by -t / .only: not a skip the test decided on.
      if (test.options.mode !== "run") this.notSelected++;
      else {
        this.skipped++;
        console.log(`skip ${test.fullName}: ${result.note ?? "(no reason given)"}`);
      }
    }
    if (test.options.mode === "run") {
      console.log(`@@case ${JSON.stringify({ state: result.state, name: test.fullName })}`);
    }
  }

  onTestRunEnd(modules: ReadonlyArray<TestModule>, errors: ReadonlyArray<SerializedError>): void {
    for (const m of modules) {
      for (const e of m.errors()) {
        this.failed++;
        console.log(`FAIL (${m.moduleId}: an error outside any test)\n${describeError(e)}`);
      }
    }
    for (const e of errors) {
      this.failed++;
      console.log(`FAIL (an unhandled error)\n${describeError(e)}`);
    }
    if (this.notSelected) console.log(`(${this.notSelected} test(s) not selected: .skip, .todo, .only or -t)`);
    console.log(`@@result ${JSON.stringify({ passed: this.passed, failed: this.failed, skipped: this.skipped })}`);
  }
}
