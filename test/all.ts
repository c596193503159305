/**
 * `npm test`: runs every test/**\/*.spec.ts on Bun, Deno and Node (run by Node 22+), each file in
 * its own process through test/run.ts, one after another (the native libraries and their thread
 * pools are shared by the whole machine: parallel files would make timings and thread tests flaky).
 *
 *   node test/all.ts [--runtime=bun,deno,node] [--filter=substr] [--timeout=180] [--verbose]
 *
 * The last line is `N passed, N failed[, N skipped]` summed over the runtimes; the exit code is
 * 1 if anything failed. A file killed at its time limit or crashed counts its unfinished tests as
 * failed (at least 1); one that crashes or hangs after its result line counts 1 more failure.
 */
import { spawn } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { join, relative } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const option = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const verbose = process.argv.includes("--verbose");
const fileLimitS = Number(option("timeout") ?? 180);
/** After its result line a file has this long to exit: a hang at exit is a bug (design: nothing deadlocks). */
const exitGraceS = 15;

type Runtime = "bun" | "deno" | "node";
const bin = (p: string) => join(root, "node_modules", p);
/** The pinned runtimes from node_modules, with the flags that make harness.gc() work. */
const commands: Record<Runtime, string[]> = {
  bun: [bin(".bin/bun")],
  deno: [bin("@deno/linux-x64-glibc/deno"), "run", "-A", "--v8-flags=--expose-gc"],
  node: [existsSync(bin(".bin/node")) ? bin(".bin/node") : process.execPath, "--expose-gc"],
};
const runtimes = (option("runtime") ?? "bun,deno,node").split(",") as Runtime[];
for (const r of runtimes) if (!(r in commands)) throw new Error(`--runtime: unknown runtime "${r}" (bun, deno, node)`);

const filter = option("filter") ?? "";
const files = readdirSync(join(root, "test"), { recursive: true, encoding: "utf8" })
  .filter((f) => f.endsWith(".spec.ts") && f.includes(filter))
  .map((f) => join("test", f))
  .sort();

type Counts = { passed: number; failed: number; skipped: number };
const totals = Object.fromEntries(runtimes.map((r) => [r, { passed: 0, failed: 0, skipped: 0 }])) as Record<Runtime, Counts>;

let current: ReturnType<typeof spawn> | undefined;
// The children lead their own process groups (so a kill reaches their own children too), hence
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

interface FileRun { code: number | null; signal: string | null; stdout: string; stderr: string; note?: string }

function runFile(runtime: Runtime, file: string): Promise<FileRun> {
  const [cmd, ...args] = commands[runtime];
  return new Promise((resolve) => {
    const child = spawn(cmd!, [...args, "test/run.ts", file], {
      cwd: root,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, DENO_NO_UPDATE_CHECK: "1", NO_COLOR: "1" },
    });
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
      if (!grace && stdout.includes("\n@@result ")) {
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
  const resultLine = lines.find((l) => l.startsWith("@@result "));
  if (resultLine) {
    const c = JSON.parse(resultLine.slice("@@result ".length)) as Counts;
    if (run.note) return { ...c, failed: c.failed + 1, note: run.note };
    if (run.signal || run.code !== (c.failed > 0 ? 1 : 0)) {
      return { ...c, failed: c.failed + 1, note: `${exit} after its result line` };
    }
    return c;
  }
  // No result line: the file crashed or was killed. Count what the lines say finished.
  const c: Counts = { passed: 0, failed: 0, skipped: 0 };
  const finished = new Set<number>();
  for (const l of lines) {
    const m = /^(ok {2}|FAIL|skip) (\d+)\/\d+ /.exec(l);
    if (!m) continue;
    finished.add(Number(m[2]));
    c[m[1] === "FAIL" ? "failed" : m[1] === "skip" ? "skipped" : "passed"]++;
  }
  const planLine = lines.find((l) => l.startsWith("@@plan "));
  const plan: string[] = planLine ? JSON.parse(planLine.slice("@@plan ".length)) : [];
  const unfinished = plan.filter((_, i) => !finished.has(i + 1));
  c.failed += Math.max(1, unfinished.length);
  const where = unfinished.length ? ` while running "${unfinished[0]}"; ${unfinished.length} test(s) unfinished` : "";
  return { ...c, note: `${run.note ?? `ended with ${exit}`} and no result line${where}` };
}

const indent = (s: string) => s.replace(/^/gm, "    ");
const pad = (s: string | number, n: number) => String(s).padStart(n);

if (files.length === 0) console.log(`no test/**/*.spec.ts file matches --filter=${filter}`);
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
    const body = run.stdout.split("\n").filter((l) => !l.startsWith("@@") && l !== "").join("\n");
    if (verbose || c.failed) {
      // Everything the file printed, its stderr tail, and why it counted as failed.
      if (body) console.log(indent(body));
      const err = run.stderr.trimEnd().split("\n").slice(-40).join("\n");
      if (err) console.log(indent(`stderr:\n${err}`));
      if (c.note) console.log(indent(`!! ${c.note}`));
    } else {
      // Skips are always shown with their reason: a skip is never a silent pass.
      for (const l of body.split("\n")) if (l.startsWith("skip ")) console.log(indent(l));
    }
  }
}

const sum = { passed: 0, failed: 0, skipped: 0 };
console.log(`\nruntime  ${pad("passed", 7)} ${pad("failed", 7)} ${pad("skipped", 8)}`);
for (const r of runtimes) {
  const t = totals[r];
  console.log(`${r.padEnd(8)} ${pad(t.passed, 7)} ${pad(t.failed, 7)} ${pad(t.skipped, 8)}`);
  sum.passed += t.passed;
  sum.failed += t.failed;
  sum.skipped += t.skipped;
}
// No spec file at all is a failure too: a run that tested nothing must not look green.
if (files.length === 0) sum.failed++;
console.log(`${sum.passed} passed, ${sum.failed} failed${sum.skipped ? `, ${sum.skipped} skipped` : ""}`);
process.exit(sum.failed > 0 ? 1 : 0);
