/**
 * The memory ledger of Deno and Node where the prebuilt one (ffi/native-ledger.ts) is absent: every monitor call
 * reaches JS through the backend's `sync` callback, and is counted here by the rule of `settle()`
 * in ffi/bun-relay.c (Bun's ledger). test/ledger-cases.ts states that rule as data; both
 * implementations are tested against it (test/ledger.spec.ts).
 */
import type { Callback, CallbackDef, LedgerFigures, MemoryLedger } from "./types.ts";

type Account = LedgerFigures & { budget: number | null };

function fresh(): Account {
  return {
    bytes: 0,
    peak: 0,
    calls: 0,
    denied: 0,
    budgetDenied: 0,
    native: 0,
    lastRefused: 0,
    lastRefusedLive: 0,
    budget: null,
  };
}

/** The accounts; `forward` gets every call (an account "not forwarding" has no native path to take). */
export function jsLedger(
  callback: (def: CallbackDef, fn: (...args: never[]) => unknown) => Callback,
  def: CallbackDef,
  forward: (id: number, bytes: number, post: boolean) => boolean,
): MemoryLedger {
  const accounts = new Map<number, Account>();
  return {
    callback: callback(def, (id: number, bytes: number | bigint, post: boolean) => forward(id, Number(bytes), post)),
    settlesNatively: false,
    reset: (id) => void accounts.set(id, fresh()),
    setForward() {},
    setBudget(id, budget) {
      const a = accounts.get(id);
      if (a !== undefined) a.budget = budget;
    },
    apply(id, bytes, post, answer) {
      const a = accounts.get(id);
      if (a === undefined) return answer ? 0 : 2;
      let verdict = 0;
      a.calls++;
      // As ledger.c: live bytes that would reach 2^63 - 1 (a double rounds it to 2^63) are refused.
      const beyond = bytes > 0 && a.bytes + bytes >= 2 ** 63;
      if (beyond) {
        verdict = 2;
      } else if (bytes > 0 && a.budget !== null && a.bytes + bytes > a.budget) {
        verdict = 1;
        a.budgetDenied++;
        a.lastRefused = bytes;
        a.lastRefusedLive = a.bytes;
      } else if (!answer) {
        verdict = 2;
      }
      // The seed: a refused call before the allocation is not counted (it never happens); everything else is.
      if (!beyond && (verdict === 0 || post || bytes <= 0)) {
        a.bytes = Math.max(a.bytes + bytes, -(2 ** 63));
        if (a.bytes > a.peak) a.peak = a.bytes;
      }
      if (verdict !== 0 && bytes > 0) a.denied++;
      return verdict;
    },
    read(id) {
      const { budget: _, ...figures } = accounts.get(id) ?? fresh();
      return figures;
    },
  };
}
