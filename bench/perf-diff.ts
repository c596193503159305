/**
 * Where memlife's time goes beyond the raw floor's, native frames included: Linux `perf record` of
 * one bench/profile.ts loop through memlife and of the same loop's raw form, each symbol's share of
 * the samples turned into ns per iteration, and the symbols listed by what memlife spends more.
 *
 *   node bench/perf-diff.ts [--case=create|use|svm] [--runtime=node|deno] [--iterations=1500000] [--top=30]
 *
 * V8 writes its JIT code's names for perf (`--perf-basic-prof`); an optimized function shows with
 * what TurboFan inlined into it, so the JS lines say which loop, and the native ones what it called:
 * a generic IC builtin (`Builtins_LoadIC`) or a runtime function (`Runtime_*`) in memlife's column
 * alone is code V8 could not specialize. Bun is not covered (JSC writes no perf map by default).
 * The figures include the loop's warm-up and the process's start: compare symbols, not totals.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const which = arg("case") ?? "use";
const runtime = arg("runtime") ?? "node";
const iterations = Number(arg("iterations") ?? 1_500_000);
const top = Number(arg("top") ?? 30);

const commands: Record<string, string[]> = {
  node: [join(root, "node_modules/.bin/node"), "--perf-basic-prof"],
  deno: [
    join(root, "node_modules/@deno/linux-x64-glibc/deno"),
    "run",
    "-A",
    "--config",
    join(root, "deno.json"),
    "--v8-flags=--perf-basic-prof",
  ],
};
if (!(runtime in commands)) throw new TypeError(`--runtime must be node or deno, not ${runtime}`);
if (spawnSync("perf", ["--version"]).status !== 0) {
  throw new Error("perf is not installed (Debian: apt-get install linux-perf)");
}

const dir = mkdtempSync(join(tmpdir(), "memlife-perf-"));
/** Each symbol's ns per iteration in one run, and the loop's own ns per iteration. */
function profile(name: string): { ns: number; bySymbol: Map<string, number> } {
  const data = join(dir, `${name}.data`);
  const [cmd, ...flags] = commands[runtime];
  const out = execFileSync(
    "perf",
    [
      "record",
      "-F",
      "4999",
      "-o",
      data,
      "--",
      cmd,
      ...flags,
      join(root, "bench/profile.ts"),
      `--case=${name}`,
      `--iterations=${iterations}`,
      "--loop-only",
    ],
    // In the temporary directory: V8 leaves a log file per process there.
    { cwd: dir, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] },
  );
  const ns = Number(/: (\d+) ns per iteration/.exec(out)?.[1]);
  if (!Number.isFinite(ns)) throw new Error(`bench/profile.ts --case=${name} printed no time: ${out}`);
  const report = execFileSync("perf", ["report", "-i", data, "--no-children", "--sort", "dso,sym", "--stdio"], {
    encoding: "utf8",
    maxBuffer: 64 << 20,
    stdio: ["ignore", "pipe", "ignore"],
  });
  const bySymbol = new Map<string, number>();
  for (const line of report.split("\n")) {
    const m = /^\s*([\d.]+)%\s+(\S+)\s+\[.\]\s+(.*)$/.exec(line);
    if (!m) continue;
    // JIT code is named per thread id: one key per function.
    const key = `${m[2] === "[JIT]" ? "JIT" : m[2]} ${m[3].replace(/^tid \d+\s*/, "").trim()}`;
    bySymbol.set(key, (bySymbol.get(key) ?? 0) + Number(m[1]) * ns / 100);
  }
  return { ns, bySymbol };
}

try {
  const memlife = profile(which);
  const raw = profile(`${which}-raw`);
  console.log(
    `${runtime}, --case=${which}: memlife ${memlife.ns} ns, raw ${raw.ns} ns per iteration under perf ` +
      `(${iterations} iterations); ns per iteration by symbol, largest extra first:`,
  );
  console.log(`${"extra".padStart(7)} ${"memlife".padStart(8)} ${"raw".padStart(7)}  symbol`);
  const keys = new Set([...memlife.bySymbol.keys(), ...raw.bySymbol.keys()]);
  const rows = [...keys].map((key) => {
    const m = memlife.bySymbol.get(key) ?? 0, r = raw.bySymbol.get(key) ?? 0;
    return { key, m, r, extra: m - r };
  }).sort((a, b) => b.extra - a.extra).slice(0, top);
  for (const { key, m, r, extra } of rows) {
    console.log(
      `${extra.toFixed(1).padStart(7)} ${m.toFixed(1).padStart(8)} ${r.toFixed(1).padStart(7)}  ${key.slice(0, 110)}`,
    );
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
