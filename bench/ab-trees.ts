/**
 * Two checkouts of memlife in ONE process, their hot loops sampled in turn: an A/B of a change
 * whose effect is smaller than the spread between processes on this VM (±5% from run to run, where
 * rounds of the two in one process agree to ±3%).
 *   bun bench/ab-trees.ts DIR_A DIR_B [--rounds=21] [--n=100000] [--case=hostptr|buffer]
 *   node bench/ab-trees.ts ...        (Deno maps `#ffi` through the one deno.json of its working
 *                                      directory, so both trees would share one backend: not there)
 * e.g. `git worktree add /tmp/b HEAD~1 && ln -s $PWD/node_modules /tmp/b/` and then
 * `bun bench/ab-trees.ts . /tmp/b`. Each round times both (their order alternates) and the
 * median of B/A over the rounds is printed with its range. Run it A/A first: the same tree twice
 * read 0.97-1.01 on Bun here (stop 42), which is the noise a difference must clear.
 * Stop 42 (Bun, a 4 KiB hostPtr "use" buffer awaited until destroyed, the bench's row that misses
 * 3x PyOpenCL): createBuffer with `bufferArguments` bypassed (constants in its place) 0.86-0.89x;
 * its options handling, `memoryBytes` or `allocationBehind` bypassed alone, or its result object
 * reused: 1.00-1.05x, within the noise.
 */
import { resolve } from "node:path";
import process from "node:process";
import { pathToFileURL } from "node:url";

const args = process.argv.slice(2);
const dirs = args.filter((a) => !a.startsWith("--"));
const option = (name: string, fallback: string) =>
  args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
if (dirs.length !== 2) {
  throw new Error("usage: bench/ab-trees.ts DIR_A DIR_B [--rounds=21] [--n=100000] [--case=hostptr|buffer]");
}
const rounds = Number(option("rounds", "21"));
const n = Number(option("n", "100000"));
const which = option("case", "hostptr");

type Memlife = typeof import("../src/mod.ts");
const load = (dir: string) => import(pathToFileURL(resolve(dir, "src/mod.ts")).href) as Promise<Memlife>;
const [a, b] = [await load(dirs[0]), await load(dirs[1])];

function loop(m: Memlife): (n: number) => Promise<void> {
  const ctx = m.cl.createContext();
  const host = new Uint8Array(new ArrayBuffer(4096));
  if (which === "buffer") {
    return (n) => {
      for (let i = 0; i < n; i++) ctx.createBuffer(4096).release();
      return Promise.resolve();
    };
  }
  return async (n) => {
    for (let i = 0; i < n; i++) {
      const buf = ctx.createBuffer(host, { hostPtr: "use" });
      const destroyed = buf.destroyed;
      buf.release();
      await destroyed;
    }
  };
}

const [fa, fb] = [loop(a), loop(b)];
const time = async (f: (n: number) => Promise<void>) => {
  const t = performance.now();
  await f(n);
  return (performance.now() - t) * 1e6 / n;
};
await fa(n);
await fb(n);
const ta: number[] = [], tb: number[] = [], ratio: number[] = [];
for (let r = 0; r < rounds; r++) {
  let x: number, y: number;
  if (r % 2 === 0) [x, y] = [await time(fa), await time(fb)];
  else [y, x] = [await time(fb), await time(fa)];
  ta.push(x);
  tb.push(y);
  ratio.push(y / x);
}
const median = (v: number[]) => [...v].sort((p, q) => p - q)[v.length >> 1];
console.log(
  `${which}: A ${median(ta).toFixed(1)} ns, B ${median(tb).toFixed(1)} ns, B/A ${median(ratio).toFixed(3)} ` +
    `(${Math.min(...ratio).toFixed(3)}-${Math.max(...ratio).toFixed(3)}, ${rounds} rounds of ${n})`,
);
