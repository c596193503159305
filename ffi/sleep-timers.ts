/**
 * Timers made of `Bun.sleep`, for Bun where the program faked the global timer functions before
 * memlife loaded (Jest-style `enableGlobally`, a preload that installs fakes). Bun's `node:timers`
 * calls the globals, so there memlife had only the fakes: its hold on the event loop ran nothing and
 * the program could end before an owed callback came (test/fixtures/fake-timers-before.ts, 1 run in
 * 3). `Bun.sleep` is Bun's own timer, which no fake replaces.
 *
 * One driver for all of them: while any timer is ref'd, it sleeps until the next one is due (50 ms
 * at most, so that a ref'd timer made meanwhile waits no longer) and runs what is due, the unref'd
 * ones too, as a runtime runs an unref'd timer while something else holds the loop. With none ref'd
 * it stops, and unref'd timers wait until one is ref'd again: a pending `Bun.sleep` always holds
 * the loop, so an unref'd timer cannot sleep without holding it. Time is `Bun.nanoseconds()`,
 * which fake clocks leave alone.
 */
import type { Timers } from "./own-timers.ts";

const STEP_MS = 50;

class SleepTimer {
  refd = true;
  readonly fn: () => void;
  due: number;
  readonly every: number | null;
  constructor(fn: () => void, due: number, every: number | null) {
    this.fn = fn;
    this.due = due;
    this.every = every;
  }
  ref(): this {
    this.refd = true;
    drive();
    return this;
  }
  unref(): this {
    this.refd = false;
    return this;
  }
  hasRef(): boolean {
    return this.refd;
  }
}

const timers = new Set<SleepTimer>();
let driving = false;
let sleep: (ms: number) => Promise<unknown>;
let now: () => number;

function drive(): void {
  if (driving) return;
  driving = true;
  void run().finally(() => (driving = false));
}

async function run(): Promise<void> {
  while (anyRefd()) {
    let next = Infinity;
    for (const t of timers) next = Math.min(next, t.due);
    await sleep(Math.max(1, Math.min(STEP_MS, next - now())));
    const at = now();
    for (const t of [...timers]) {
      if (t.due > at || !timers.has(t)) continue;
      if (t.every === null) timers.delete(t);
      else t.due = at + t.every;
      // A timer function that throws ends this run as an unhandled rejection, as a runtime reports
      // it; `finally` lets the next ref start another.
      t.fn();
    }
  }
}

function anyRefd(): boolean {
  for (const t of timers) if (t.refd) return true;
  return false;
}

function make(fn: () => void, ms: number, every: boolean): SleepTimer {
  const delay = Math.max(0, Number(ms) || 0);
  const t = new SleepTimer(fn, now() + delay, every ? Math.max(1, delay) : null);
  timers.add(t);
  drive();
  return t;
}

/** The timers, with Bun's `sleep` and a clock in milliseconds. */
export function sleepTimers(bunSleep: (ms: number) => Promise<unknown>, clockMs: () => number): Timers {
  sleep = bunSleep;
  now = clockMs;
  return {
    setTimeout: ((fn: () => void, ms?: number) => make(fn, ms ?? 0, false)) as unknown as typeof setTimeout,
    setInterval: ((fn: () => void, ms?: number) => make(fn, ms ?? 0, true)) as unknown as typeof setInterval,
    clearInterval: ((t: unknown) => void timers.delete(t as SleepTimer)) as typeof clearInterval,
    setImmediate: ((fn: () => void) => make(fn, 0, false)) as unknown as typeof setImmediate,
  };
}
