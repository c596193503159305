// Node preload for test/device/one.sh (`node --import ./test/device/diag.ts FIXTURE ...`): says
// what keeps a fixture's process alive. After MEMLIFE_DIAG_AFTER_MS (default 5000) and again at
// twice that, it prints Node's active resources, the native callbacks memlife owes, and every
// async OpenCL call (koffi, libuv pool) started and not yet returned, with its age. Its timers are
// unref'ed: they never keep the process alive themselves. If they never print, the JS thread is
// blocked (one.sh then shows the native threads).
import process from "node:process";
import * as koffi from "koffi";
import { owedCallbacks } from "../../src/callbacks.ts";
import { cl } from "../../src/mod.ts";

// Lets one.sh's test/device/stack.py (not an ancestor of this process) read its stacks under
// Yama's ptrace_scope 1: prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY).
try {
  koffi.load(null).func("prctl", "int", ["int", "unsigned long", "unsigned long", "unsigned long", "unsigned long"])(
    0x59616d61,
    0xffffffffffffffffn,
    0,
    0,
    0,
  );
} catch {
  // Not Linux, or no Yama: nothing to lift.
}

const t0 = performance.now();
const ms = (): string => `${(performance.now() - t0).toFixed(0)} ms`;
const running = new Map<number, { name: string; at: number }>();
const started: Record<string, number> = {};
const ended: Record<string, number> = {};
let next = 0;

const lib = cl.library();
const table = lib.async as Record<string, ((...args: unknown[]) => Promise<unknown>) | undefined>;
for (const name of Object.keys(table)) {
  const fn = table[name];
  if (fn === undefined) continue;
  table[name] = (...args: unknown[]) => {
    const id = ++next;
    started[name] = (started[name] ?? 0) + 1;
    running.set(id, { name, at: performance.now() });
    const end = () => {
      running.delete(id);
      ended[name] = (ended[name] ?? 0) + 1;
    };
    const call = fn(...args);
    call.then(end, end);
    return call;
  };
}

function dump(label: string): void {
  const now = performance.now();
  const open = [...running.values()].map((r) => `${r.name} (${(now - r.at).toFixed(0)} ms)`);
  const lines = [
    `diag ${label} at ${ms()}:`,
    `  active resources: ${JSON.stringify(process.getActiveResourcesInfo())}`,
    `  owed callbacks (owe - paid): ${owedCallbacks()}`,
    `  async calls started ${JSON.stringify(started)}`,
    `  async calls ended   ${JSON.stringify(ended)}`,
    `  not returned (${open.length}): ${open.slice(0, 20).join(", ")}${open.length > 20 ? ", ..." : ""}`,
  ];
  process.stderr.write(lines.join("\n") + "\n");
}

const after = Number(process.env.MEMLIFE_DIAG_AFTER_MS ?? 5000);
setTimeout(() => dump("first"), after).unref();
setTimeout(() => dump("second"), 2 * after).unref();
process.on("beforeExit", () => process.stderr.write(`diag: beforeExit at ${ms()}\n`));
process.on("exit", (code) => process.stderr.write(`diag: exit event (code ${code}) at ${ms()}\n`));
