/**
 * `npm test`: runs every test/**\/*.spec.ts under vitest on Bun, Deno and Node, ONE vitest process
 * per spec file and runtime, one after another, and sums the results:
 *
 *   node test/all.ts [--runtime=bun,deno,node] [--filter=substr[,substr...]] [--timeout=180] [--verbose] [-- vitest args]
 *
 * e.g. `node test/all.ts --runtime=deno --filter=opencl -- -t "SVM"`. Runs on Bun and Deno too.
 * Besides the three runtimes, two passes run Deno and Node without the prebuilt library
 * (`deno-nolib`, `node-nolib`), as on a platform it is not built for (macOS, Windows), from JSR,
 * or where Deno's `--allow-ffi` does not cover it: the suite runs from a copy of the tree without
 * ffi/prebuilt/*\/libmemlife-ledger.so, with MEMLIFE_TEST_NOLIB=1 telling the tests that check the
 * library's presence to check its absence (test/helpers.ts `nolib`).
 * Why a process per file, and not one vitest run per runtime:
 * - isolation on every runtime: the native libraries and callback trampolines are process-wide,
 *   and Bun runs vitest's threads pool (its forks pool fails there), which shares one process;
 * - a hard time limit per file: a test that blocks the JS thread forever stops vitest's own
 *   timeouts too; here the file's process group is killed and the run goes on;
 * - the exit check: a file's process that does not exit within `exitGraceS` of its result line
 *   fails (nothing deadlocks at exit).
 * Each file's JUnit report goes to test-results/<runtime>/ (git-ignored), for CI; skip reasons
 * are in this script's output only (vitest's JUnit has none).
 * The last line is `N passed, N failed[, N skipped]` summed over the runtimes; the exit code is
 * 1 if anything failed. A file killed or crashed counts its unfinished tests as failed (at least
 * 1); one that crashes or hangs after its result line counts 1 more failure.
 */
import { spawn } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join, relative } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const dashes = process.argv.indexOf("--");
const ownArgs = dashes < 0 ? process.argv.slice(2) : process.argv.slice(2, dashes);
const vitestArgs = dashes < 0 ? [] : process.argv.slice(dashes + 1);
const option = (name: string) => ownArgs.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const verbose = ownArgs.includes("--verbose");
const fileLimitS = Number(option("timeout") ?? 180);
/** After its result line a file has this long to exit: a hang at exit is a bug (design: nothing deadlocks). */
const exitGraceS = Number(option("grace") ?? 15);
/** The spec files that fail on purpose, for test/suite.spec.ts (vitest.config.ts reads the variable). */
const fixtures = ownArgs.includes("--fixtures");

type Runtime = "bun" | "deno" | "node" | "deno-nolib" | "node-nolib";
const bin = (p: string) => join(root, "node_modules", p);
const vitest = bin("vitest/vitest.mjs");
/** The pinned runtimes from node_modules, each running vitest's CLI. */
const commands: Record<Runtime, string[]> = {
  // --bun: Bun itself, not the Node that vitest.mjs's shebang names, runs vitest.
  bun: [bin(".bin/bun"), "--bun", vitest],
  deno: [bin("@deno/linux-x64-glibc/deno"), "run", "-A", vitest],
  node: [existsSync(bin(".bin/node")) ? bin(".bin/node") : process.execPath, vitest],
  // Without the prebuilt library (see the header): Bun never loads it, so it has no such pass.
  "deno-nolib": [bin("@deno/linux-x64-glibc/deno"), "run", "-A", vitest],
  "node-nolib": [existsSync(bin(".bin/node")) ? bin(".bin/node") : process.execPath, vitest],
};
const runtimes = (option("runtime") ?? "bun,deno,node,deno-nolib,node-nolib").split(",") as Runtime[];
for (const r of runtimes) {
  if (!(r in commands)) throw new Error(`--runtime: unknown runtime "${r}" (${Object.keys(commands).join(", ")})`);
}
const nolib = (r: Runtime) => r.endsWith("-nolib");

/**
 * A copy of the tree without the prebuilt library, for the `-nolib` passes, made once; its
 * node_modules is the tree's. Left out besides: what no test reads (git, build and device folders).
 */
const nolibTree = lazy(() => {
  const tree = mkdtempSync(join(tmpdir(), "memlife-nolib-"));
  const skip = new Set([".git", "node_modules", "dist", "test-results", ".device"]);
  cpSync(root, tree, {
    recursive: true,
    filter: (from) =>
      relative(root, from).split("/").length > 1 || !skip.has(basename(from)) && !basename(from).startsWith("_x_"),
  });
  const prebuilt = join(tree, "ffi", "prebuilt");
  for (const platform of readdirSync(prebuilt, { withFileTypes: true })) {
    if (platform.isDirectory()) rmSync(join(prebuilt, platform.name, "libmemlife-ledger.so"), { force: true });
  }
  symlinkSync(join(root, "node_modules"), join(tree, "node_modules"));
  process.on("exit", () => rmSync(tree, { recursive: true, force: true }));
  return tree;
});

function lazy<T>(make: () => T): () => T {
  let made: { value: T } | undefined;
  return () => (made ??= { value: make() }).value;
}

const filter = option("filter") ?? "";
// A comma-separated list runs the files that match any of its parts: a device call has a time
// limit, so a suite that outgrew one call is run in two (test/device/run.sh).
const filters = filter.split(",");
const dir = fixtures ? join("test", "fixtures", "suite") : "test";
const files = readdirSync(join(root, dir), { recursive: !fixtures, encoding: "utf8" })
  .filter((f) => f.endsWith(".spec.ts") && !f.startsWith("fixtures/") && filters.some((part) => f.includes(part)))
  .map((f) => join(dir, f))
  .sort();

type Counts = { passed: number; failed: number; skipped: number };
const totals = Object.fromEntries(runtimes.map((r) => [r, { passed: 0, failed: 0, skipped: 0 }])) as Record<
  Runtime,
  Counts
>;

let current: ReturnType<typeof spawn> | undefined;
// The children lead their own process groups (so a kill reaches vitest's workers too), hence
// Ctrl-C does not reach them by itself.
for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.on(sig, () => {
    if (current?.pid) killGroup(current.pid);
    process.exit(130);
  });
}
function killGroup(pid: number): void {
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // already gone
  }
}

interface FileRun {
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  note?: string;
}

function runFile(runtime: Runtime, file: string): Promise<FileRun> {
  const [cmd, ...args] = commands[runtime];
  // In the repository, for every pass: a -nolib pass runs in a copy of the tree, removed at exit.
  const junit = join(root, "test-results", runtime, `${relative("test", file).replaceAll("/", "_")}.xml`);
  return new Promise((resolve) => {
    const child = spawn(
      cmd!,
      [
        ...args,
        "run",
        file,
        "--reporter=./test/reporter.ts",
        // The fixtures fail on purpose: no report of theirs must reach CI.
        ...(fixtures ? [] : ["--reporter=junit", `--outputFile.junit=${junit}`]),
        ...vitestArgs,
      ],
      {
        cwd: nolib(runtime) ? nolibTree() : root,
        detached: true,
        stdio: ["ignore", "pipe", "pipe"],
        env: {
          ...process.env,
          DENO_NO_UPDATE_CHECK: "1",
          NO_COLOR: "1",
          ...(fixtures ? { MEMLIFE_TEST_FIXTURES: "1" } : {}),
          ...(nolib(runtime) ? { MEMLIFE_TEST_NOLIB: "1" } : {}),
        },
      },
    );
    current = child;
    let stdout = "";
    let stderr = "";
    let note: string | undefined;
    const kill = (why: string) => {
      note ??= why;
      killGroup(child.pid!);
    };
    const limit = setTimeout(() => kill(`killed at the ${fileLimitS} s time limit`), fileLimitS * 1000);
    let grace: ReturnType<typeof setTimeout> | undefined;
    child.stdout.setEncoding("utf8").on("data", (s: string) => {
      stdout += s;
      if (!grace && /^@@result /m.test(stdout)) {
        grace = setTimeout(() => kill(`did not exit within ${exitGraceS} s of its result line`), exitGraceS * 1000);
      }
    });
    child.stderr.setEncoding("utf8").on("data", (s: string) => (stderr += s));
    const finish = (code: number | null, signal: string | null) => {
      clearTimeout(limit);
      clearTimeout(grace);
      current = undefined;
      resolve({ code, signal, stdout, stderr, note });
    };
    child.on("error", (e) => {
      note = `could not start ${cmd}: ${e.message} (run .ci/setup)`;
      finish(null, null);
    });
    child.on("close", finish);
  });
}

/** Counts of one file; `note` says why a process counted as failed beyond its own result. */
function tally(run: FileRun): Counts & { note?: string } {
  const lines = run.stdout.split("\n");
  const exit = run.signal ?? `exit code ${run.code}`;
  const finished = new Set<string>();
  const c: Counts = { passed: 0, failed: 0, skipped: 0 };
  for (const l of lines) {
    if (!l.startsWith("@@case ")) continue;
    const { state, name } = JSON.parse(l.slice("@@case ".length)) as { state: string; name: string };
    finished.add(name);
    c[state === "failed" ? "failed" : state === "skipped" ? "skipped" : "passed"]++;
  }
  const plan: string[] = lines.filter((l) => l.startsWith("@@plan ")).flatMap((l) =>
    JSON.parse(l.slice("@@plan ".length))
  );
  // Tests that never finished (the file was killed, or its worker died) count as failed.
  const unfinished = plan.filter((name) => !finished.has(name));
  const where = unfinished.length ? ` while running "${unfinished[0]}"; ${unfinished.length} test(s) unfinished` : "";
  const resultLine = lines.find((l) => l.startsWith("@@result "));
  if (resultLine) {
    // The reporter's counts also hold the errors outside any test (a worker that died).
    const r = JSON.parse(resultLine.slice("@@result ".length)) as Counts;
    r.failed += unfinished.length;
    if (run.note) return { ...r, failed: r.failed + 1, note: run.note };
    if (run.signal || run.code !== (r.failed > 0 ? 1 : 0)) {
      return { ...r, failed: r.failed + 1, note: `${exit} after its result line${where}` };
    }
    // A file where nothing ran tested nothing, unless -t or the like deselected everything.
    if (r.passed + r.failed + r.skipped === 0 && vitestArgs.length === 0) {
      return { ...r, failed: 1, note: "no test ran" };
    }
    return unfinished.length ? { ...r, note: `${unfinished.length} test(s) unfinished, "${unfinished[0]}" first` } : r;
  }
  // No result line: the file crashed or was killed.
  c.failed += Math.max(1, unfinished.length);
  return { ...c, note: `${run.note ?? `ended with ${exit}`} and no result line${where}` };
}

const indent = (s: string) => s.replace(/^/gm, "    ");
const pad = (s: string | number, n: number) => String(s).padStart(n);

/** What failed, repeated at the end: CI keeps an output's tail, where the per-file detail may be cut. */
const recap: string[] = [];
const started = performance.now();
if (files.length === 0) console.log(`no ${dir}/**/*.spec.ts file matches --filter=${filter}`);
for (const runtime of runtimes) {
  for (const file of files) {
    const start = performance.now();
    const run = await runFile(runtime, file);
    const c = tally(run);
    const t = totals[runtime];
    t.passed += c.passed;
    t.failed += c.failed;
    t.skipped += c.skipped;
    const secs = ((performance.now() - start) / 1000).toFixed(1);
    console.log(
      `${c.failed ? "FAIL" : "ok  "} ${runtime.padEnd(4)} ${relative("test", file)}: ` +
        `${c.passed} passed, ${c.failed} failed, ${c.skipped} skipped (${secs} s)`,
    );
    const body = run.stdout.split("\n").filter((l) => !l.startsWith("@@") && !l.startsWith("JUNIT report") && l !== "")
      .join("\n");
    if (verbose || c.failed) {
      // Everything the file printed, its stderr tail, and why it counted as failed.
      if (body) console.log(indent(body));
      const err = run.stderr.trimEnd().split("\n").slice(-40).join("\n");
      if (err) console.log(indent(`stderr:\n${err}`));
      if (c.note) console.log(indent(`!! ${c.note}`));
      recap.push(`${runtime} ${relative("test", file)}${c.note ? `: ${c.note}` : ""}`);
      const lines = body.split("\n");
      for (const [i, l] of lines.entries()) {
        if (!l.startsWith("FAIL ")) continue;
        // The test's name and the first lines of its error.
        const error = lines.slice(i + 1, i + 6).filter((e) => !/^(ok|FAIL|skip) /.test(e));
        recap.push(indent(l), ...error.map((e) => indent(indent(e.slice(0, 300)))));
      }
    } else {
      // Skips are always shown with their reason: a skip is never a silent pass.
      for (const l of body.split("\n")) if (l.startsWith("skip ") || l.startsWith("(")) console.log(indent(l));
    }
  }
}

const sum = { passed: 0, failed: 0, skipped: 0 };
if (recap.length) console.log(`\nfailed:\n${indent(recap.join("\n"))}`);
console.log(
  `\nruntime    ${pad("passed", 5)} ${pad("failed", 7)} ${pad("skipped", 8)}   (${
    ((performance.now() - started) / 1000).toFixed(1)
  } s)`,
);
for (const r of runtimes) {
  const t = totals[r];
  console.log(`${r.padEnd(10)} ${pad(t.passed, 5)} ${pad(t.failed, 7)} ${pad(t.skipped, 8)}`);
  sum.passed += t.passed;
  sum.failed += t.failed;
  sum.skipped += t.skipped;
}
// No spec file at all is a failure too: a run that tested nothing must not look green.
if (files.length === 0) sum.failed++;
console.log(`${sum.passed} passed, ${sum.failed} failed${sum.skipped ? `, ${sum.skipped} skipped` : ""}`);
process.exit(sum.failed > 0 ? 1 : 0);
