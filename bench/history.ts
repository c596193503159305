/**
 * Each target check of the full runs kept in bench/results/history/, as a table: memlife's ratio
 * per row, median [min–max] over the runs, and in how many it was met. A run's count of checks met
 * moves by about ±3 with no code change (the 2-core VM), so a change is judged on a row's spread
 * over several runs, before against after, not on one run.
 *
 *   node bench/history.ts [--last=4] [--split=<stamp>] [--before=10] [--missed]
 *
 *   --last=N        the N newest full runs (partial and quick runs are left out); 4 by default
 *   --split=STAMP   two columns: up to --before runs older than STAMP (a history file's name, or
 *                   its start: 2026-11-28T05-53), and the --last runs from STAMP on
 *   --missed        only the rows missed in at least one run shown
 *
 * The value is the first ratio of a check's text (memlife's; "raw FFI" figures are left out).
 * A run's file is <stamp>.json.gz (what bench/main.ts writes) or a plain <stamp>.json; where both
 * exist, the gzipped one is read.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { gunzipSync } from "node:zlib";

interface Check {
  row: string;
  case: string;
  target: string;
  met: boolean;
  value: string;
}
interface Run {
  stamp: string;
  checks: Check[];
}

const dir = fileURLToPath(new URL("./results/history/", import.meta.url));
const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const count = (name: string, fallback: number) => {
  const text = arg(name);
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`--${name} takes a whole number of runs, got ${text}`);
  return n;
};
const last = count("last", 4);
const before = count("before", 10);
const split = arg("split");
const missedOnly = process.argv.includes("--missed");

const files = new Map<string, string>();
for (const f of readdirSync(dir).sort()) {
  const m = /^(\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d)\.json(\.gz)?$/.exec(f);
  if (m !== null && (m[2] !== undefined || !files.has(m[1]))) files.set(m[1], f);
}
const runs: Run[] = [...files]
  .sort(([a], [b]) => a.localeCompare(b))
  .map(([stamp, f]) => {
    const bytes = readFileSync(join(dir, f));
    const text = (f.endsWith(".gz") ? gunzipSync(bytes) : bytes).toString("utf8");
    const doc = JSON.parse(text) as { set?: string; checks?: Check[] };
    return { stamp, set: doc.set, checks: doc.checks ?? [] };
  })
  .filter((r) => r.set === "default" && r.checks.length > 0);

let groups: { title: string; runs: Run[] }[];
if (split === undefined) {
  groups = [{ title: "", runs: runs.slice(-last) }];
} else {
  const at = runs.findIndex((r) => r.stamp >= split);
  if (at < 0) throw new RangeError(`no full run from ${split} on`);
  groups = [
    { title: "before", runs: runs.slice(Math.max(0, at - before), at) },
    { title: "after", runs: runs.slice(at, at + last) },
  ];
}

/** memlife's ratio: the first number before "×" in the check's text. */
function ratio(value: string): number | undefined {
  const m = /([\d.]+)×/.exec(value);
  return m === null ? undefined : Number(m[1]);
}

function cell(checks: Check[]): string {
  const values = checks.map((c) => ratio(c.value)).filter((v): v is number => v !== undefined).sort((a, b) => a - b);
  const met = checks.filter((c) => c.met).length;
  if (checks.length === 0) return "—";
  // A check without a ratio (a callback's µs over C's): how often it was met, and its first value.
  if (values.length === 0) return `${checks[0].value.split(" over")[0]} …, met ${met} of ${checks.length}`;
  const median = values.length % 2 === 1
    ? values[values.length >> 1]
    : (values[values.length / 2 - 1] + values[values.length / 2]) / 2;
  return `${median.toFixed(2)} [${values[0].toFixed(2)}–${
    values[values.length - 1].toFixed(2)
  }], met ${met} of ${checks.length}`;
}

const keys = new Map<string, { runtime: string; case: string; target: string }>();
for (const g of groups) {
  for (const r of g.runs) {
    for (const c of r.checks) {
      keys.set(`${c.row}|${c.case}|${c.target}`, { runtime: c.row.split(" ")[0], case: c.case, target: c.target });
    }
  }
}
const header = [
  "runtime",
  "row",
  "target",
  ...groups.map((g) => `${g.title ? `${g.title}: ` : ""}${g.runs.length} runs`),
];
const lines = [`| ${header.join(" | ")} |`, `|${header.map(() => "---").join("|")}|`];
for (const [key, k] of [...keys].sort(([a], [b]) => a.localeCompare(b))) {
  const per = groups.map((g) =>
    g.runs.flatMap((r) => r.checks.filter((c) => `${c.row}|${c.case}|${c.target}` === key))
  );
  if (missedOnly && per.every((checks) => checks.every((c) => c.met))) continue;
  lines.push(`| ${k.runtime} | ${k.case} | ${k.target} | ${per.map(cell).join(" | ")} |`);
}
console.log(lines.join("\n"));
for (const g of groups) {
  const met = g.runs.map((r) => `${r.stamp} ${r.checks.filter((c) => c.met).length}/${r.checks.length}`);
  console.log(`\n${g.title || "runs"}: ${met.join(", ")}`);
}
