/**
 * The memory ledger's rule, as data: Bun's native ledger (`settle()` in ffi/bun-relay.c) and the JS
 * one of Deno and Node (ffi/js-ledger.ts) are both tested against these cases (test/ledger.spec.ts).
 * Each case starts from a fresh account with `budget`, settles `calls` in order with `apply`, each
 * expecting its verdict, then expects the account's figures.
 * Verdicts: 0 allowed, 1 refused by the budget, 2 refused by the monitor's answer.
 */
import type { LedgerFigures } from "../ffi/types.ts";

export interface LedgerCase {
  readonly name: string;
  readonly budget: number | null;
  /** bytes (> 0 allocation, < 0 free), post (after the allocation happened), the monitor's answer, verdict. */
  readonly calls: readonly (readonly [bytes: number, post: boolean, answer: boolean, verdict: 0 | 1 | 2])[];
  readonly figures: Omit<LedgerFigures, "native">;
}

const none = { denied: 0, budgetDenied: 0, lastRefused: 0, lastRefusedLive: 0 };

export const ledgerCases: readonly LedgerCase[] = [
  {
    // A hostile library's monitor call (an Embree shim): the sum wrapped negative and got past the budget.
    name:
      "an allocation that would take the live bytes to 2^63 - 1 or past is refused and not counted, even after it happened",
    budget: 1_000_000,
    calls: [[100, true, true, 0], [2 ** 63, false, true, 2], [2 ** 63, true, true, 2], [-100, true, true, 0]],
    figures: { bytes: 0, peak: 100, calls: 4, ...none, denied: 2 },
  },
  {
    name: "frees past -(2^63) stop there",
    budget: null,
    calls: [[-(2 ** 62), true, true, 0], [-(2 ** 62), true, true, 0], [-(2 ** 62), true, true, 0]],
    figures: { bytes: -(2 ** 63), peak: 0, calls: 3, ...none },
  },
  {
    name: "an allowed allocation counts, before or after it happened",
    budget: null,
    calls: [[100, false, true, 0], [50, true, true, 0]],
    figures: { bytes: 150, peak: 150, calls: 2, ...none },
  },
  {
    name: "a free counts and lowers bytes; the peak stays",
    budget: null,
    calls: [[100, false, true, 0], [-60, false, true, 0]],
    figures: { bytes: 40, peak: 100, calls: 2, ...none },
  },
  {
    name: "an allocation refused before it happened is not counted: it never happens",
    budget: null,
    calls: [[100, false, false, 2]],
    figures: { bytes: 0, peak: 0, calls: 1, ...none, denied: 1 },
  },
  {
    name: "an allocation refused after it happened is counted",
    budget: null,
    calls: [[100, true, false, 2]],
    figures: { bytes: 100, peak: 100, calls: 1, ...none, denied: 1 },
  },
  {
    name: "a refused free still counts and is no denial",
    budget: null,
    calls: [[100, false, true, 0], [-100, false, false, 2]],
    figures: { bytes: 0, peak: 100, calls: 2, ...none },
  },
  {
    name: "an allocation up to the budget is allowed",
    budget: 100,
    calls: [[60, false, true, 0], [40, false, true, 0]],
    figures: { bytes: 100, peak: 100, calls: 2, ...none },
  },
  {
    name: "the budget refuses what would go over it, and records the refusal",
    budget: 150,
    calls: [[100, false, true, 0], [60, false, true, 1]],
    figures: { bytes: 100, peak: 100, calls: 2, denied: 1, budgetDenied: 1, lastRefused: 60, lastRefusedLive: 100 },
  },
  {
    name: "the budget's refusal comes first, whatever the monitor answered",
    budget: 50,
    calls: [[100, false, false, 1]],
    figures: { bytes: 0, peak: 0, calls: 1, denied: 1, budgetDenied: 1, lastRefused: 100, lastRefusedLive: 0 },
  },
  {
    name: "an allocation over the budget after it happened is refused and counted",
    budget: 50,
    calls: [[100, true, true, 1]],
    figures: { bytes: 100, peak: 100, calls: 1, denied: 1, budgetDenied: 1, lastRefused: 100, lastRefusedLive: 0 },
  },
  {
    name: "a free is never refused by the budget",
    budget: 0,
    calls: [[-10, false, true, 0]],
    figures: { bytes: -10, peak: 0, calls: 1, ...none },
  },
  {
    name: "frees make room under the budget again",
    budget: 100,
    calls: [[100, false, true, 0], [10, false, true, 1], [-50, false, true, 0], [10, false, true, 0]],
    figures: { bytes: 60, peak: 100, calls: 4, denied: 1, budgetDenied: 1, lastRefused: 10, lastRefusedLive: 100 },
  },
];
