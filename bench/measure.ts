/**
 * The timing method every benchmark process uses (bench/baseline.c and bench/pyopencl_cases.py
 * repeat it): warm up while calibrating an operation count that runs at least `sampleMs`, then
 * take `samples` samples of that many operations, and print per-operation nanoseconds (median,
 * quartiles, extremes and the samples themselves) as one JSON line on stdout. Implementations that
 * are compared with each other are sampled round-robin (`measureAll`).
 *
 * Runs unchanged on Bun, Deno and Node: only `performance.now()` and `console.log`.
 */

export interface MeasureOptions {
  /** Shortest duration of one sample, in milliseconds. */
  readonly sampleMs: number;
  /** Warm-up: keep running (and calibrating) at least this long before the first sample. */
  readonly warmupMs: number;
  readonly samples: number;
  /**
   * Take each round's samples one operation of each entry at a time instead of one whole sample
   * after another: for operations of a millisecond or more (Embree commits), whose timing in a
   * JS process moves by a fifth from one 50 ms sample to the next.
   */
  readonly interleave?: boolean;
}

/**
 * One benchmark body: performs `n` operations. It may return the nanoseconds to count (when only
 * part of the work is the thing measured, e.g. `commit()` but not building the scene), else the
 * wall time of the whole call is counted.
 */
export type Body = (n: number) => number | void | Promise<number | void>;

export interface ResultLine {
  type: "result";
  case: string;
  runtime: string;
  impl: string;
  /** Operations per sample. */
  iterations: number;
  /** What one operation processes (triangles per build; 1 otherwise): items/s = items * ops/s. */
  items: number;
  /** Nanoseconds per operation. */
  median: number;
  min: number;
  max: number;
  q1: number;
  q3: number;
  samples: number[];
  /** Counts per operation a case reports besides time (e.g. memory monitor calls per build). */
  perOp?: Record<string, number>;
}

export interface UnavailableLine {
  type: "unavailable";
  case: string;
  runtime: string;
  impl: string;
  reason: string;
}

export interface InfoLine {
  type: "info";
  runtime: string;
  [key: string]: unknown;
}

export type Line = ResultLine | UnavailableLine | InfoLine;

export function emit(line: Line): void {
  console.log(JSON.stringify(line));
}

/**
 * What runs before each sample (see `measureAll`): a collection of the young generation, so that a
 * sample does not pay for the garbage the entry sampled before it left behind. Not a full one on
 * V8 (Deno, Node): after a full collection V8 deoptimizes the code of memlife's hot paths ("embedded
 * weak objects cleared" under --trace-deopt, about 25 functions, Node's own timers among them) and
 * the next 50 ms sample runs while it re-optimizes: memlife's SVM free path measured 7–14 us per op
 * after it instead of 3.1–5.7, its raw floor (no JS objects) 2.2–3.3 either way (Node). A program pays that
 * once per full collection, which V8 runs seconds apart (none at all in these loops without a
 * forced one, by --trace-gc), not once per 50 ms. JavaScriptCore (Bun) shows no such cliff, and
 * its forced collection stays a full, synchronous one. Undefined without --expose-gc.
 */
export function settler(): (() => void) | undefined {
  const g = globalThis as { gc?: (options?: { type: "minor" | "major" }) => void; Bun?: { gc(force: boolean): void } };
  if (g.Bun !== undefined) return () => g.Bun!.gc(true);
  const gc = g.gc;
  return gc === undefined ? undefined : () => gc({ type: "minor" });
}

/** Quantile of sorted values, linear between neighbours. */
export function quantile(sorted: readonly number[], q: number): number {
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}

/** A fixed sequence (the same in every run and runtime) of pseudo-random numbers in [0, 1). */
let seed = 0x2545f491;
function random(): number {
  // xorshift32
  seed ^= seed << 13;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  return (seed >>> 0) / 2 ** 32;
}

/** Fisher-Yates, in place. */
function shuffle(order: number[]): void {
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [order[i], order[j]] = [order[j], order[i]];
  }
}

async function timed(body: Body, n: number): Promise<number> {
  const start = performance.now();
  const counted = await body(n);
  const wall = (performance.now() - start) * 1e6;
  return typeof counted === "number" ? counted : wall;
}

/** One implementation of one case, to be measured alongside the others it is compared with. */
export interface Entry {
  readonly case: string;
  readonly impl: string;
  /** What one operation processes (triangles per build), 1 otherwise. */
  readonly items: number;
  readonly body: Body;
  /** Extra per-operation counts to report, read after the samples. */
  readonly perOp?: () => Record<string, number>;
}

/**
 * Measures entries that will be compared with each other (a case's raw floor and memlife; the
 * Embree variants of one scene size). Each is warmed up and calibrated on its own; then the samples
 * are taken round-robin, one of each entry per round, so that a change in machine load (other
 * processes, CPU frequency) hits all of them alike instead of biasing their ratios; with
 * `options.interleave`, one operation of each at a time. `settle` runs before every sample (every
 * round when interleaved; `settler()`: a young-generation collection), so that no sample pays for
 * the garbage its predecessor left. Returns a result line, or an error message, per entry.
 */
export async function measureAll(
  options: MeasureOptions,
  runtime: string,
  entries: readonly Entry[],
  settle?: () => void,
): Promise<(ResultLine | string)[]> {
  const sampleNs = options.sampleMs * 1e6;
  const state = entries.map(() => ({ n: 1, perOp: [] as number[], error: undefined as string | undefined }));
  const fail = (i: number, error: unknown) => {
    state[i].error = `error: ${error instanceof Error ? error.message : String(error)}`;
  };
  for (const [i, entry] of entries.entries()) {
    // Warm-up doubles as calibration: grow n towards one sample's length (at most 10x per step,
    // so a first call that was slow for warm-up reasons does not decide n alone).
    try {
      let n = 1;
      let spent = 0;
      settle?.();
      for (;;) {
        const elapsed = await timed(entry.body, n);
        spent += elapsed;
        if (elapsed >= sampleNs && spent >= options.warmupMs * 1e6) break;
        if (elapsed < sampleNs) {
          const perOp = elapsed / n;
          const next = perOp > 0 ? Math.ceil((sampleNs / perOp) * 1.1) : n * 2;
          n = Math.max(n, Math.min(n * 10, next));
        }
      }
      state[i].n = n;
    } catch (error) {
      fail(i, error);
    }
  }
  for (let round = 0; round < options.samples; round++) {
    if (options.interleave === true) {
      // One operation of each entry in turn: a slow spell of the machine shorter than a sample
      // (a collector's or another process's threads on the cores the builds use) hits every
      // entry alike, not whichever one was being sampled. In a new order each turn, so that no
      // entry always runs after the same one (in a fixed order, memlife's budget builds, each
      // right after the raw floor's JS-monitored one, read 0.93-0.96x its unmonitored builds).
      settle?.();
      const spent = entries.map(() => 0);
      const most = Math.max(...state.map((s) => (s.error === undefined ? s.n : 0)));
      const order = entries.map((_, i) => i);
      for (let k = 0; k < most; k++) {
        shuffle(order);
        for (const i of order) {
          const entry = entries[i];
          if (state[i].error !== undefined || k >= state[i].n) continue;
          try {
            spent[i] += await timed(entry.body, 1);
          } catch (error) {
            fail(i, error);
          }
        }
      }
      state.forEach((s, i) => s.perOp.push(spent[i] / s.n));
      continue;
    }
    for (const [i, entry] of entries.entries()) {
      if (state[i].error !== undefined) continue;
      try {
        settle?.();
        state[i].perOp.push((await timed(entry.body, state[i].n)) / state[i].n);
      } catch (error) {
        fail(i, error);
      }
    }
  }
  return entries.map((entry, i): ResultLine | string => {
    const { n, perOp, error } = state[i];
    if (error !== undefined) return error;
    const sorted = [...perOp].sort((a, b) => a - b);
    const line: ResultLine = {
      type: "result",
      case: entry.case,
      runtime,
      impl: entry.impl,
      iterations: n,
      items: entry.items,
      median: quantile(sorted, 0.5),
      min: sorted[0],
      max: sorted[sorted.length - 1],
      q1: quantile(sorted, 0.25),
      q3: quantile(sorted, 0.75),
      samples: perOp.map((x) => Math.round(x * 1000) / 1000),
    };
    if (entry.perOp !== undefined) line.perOp = entry.perOp();
    return line;
  });
}
