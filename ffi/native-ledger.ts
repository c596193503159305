/**
 * The memory ledger of Deno and Node when the prebuilt library is there: ffi/ledger.c (Bun's own
 * ledger, the same file) built ahead of time into ffi/prebuilt/<os>-<arch>/libmemlife-ledger.so by
 * ffi/prebuilt/build.sh. The calls of an account that does not forward (a device with a budget or
 * accounting but no JS monitor) are then settled in C on the thread that allocates, with no round
 * trip to the JS thread. Where the library is absent (another platform, a JSR import, whose files
 * are not on disk) or cannot be opened (Deno's `--allow-ffi` limited to other paths), the backend
 * uses ffi/js-ledger.ts instead.
 */
import { BackendError } from "./errors.ts";
import { AsyncQueue } from "./async-queue.ts";
import { jsLedger } from "./js-ledger.ts";
import { ownClearInterval, ownSetInterval } from "./own-timers.ts";
import type {
  Backend,
  Callback,
  CallbackDef,
  LedgerFigures,
  MemoryLedger,
  NativeLibrary,
  OpenOptions,
  SymbolDef,
  SymbolTable,
} from "./types.ts";

export const nativeLedgerSymbols = {
  ledger_init: { args: ["fn"], returns: "ptr" },
  ledger_reset: { args: ["u32"], returns: "i32" },
  ledger_set_forward: { args: ["u32", "i32"], returns: "void" },
  ledger_set_budget: { args: ["u32", "i32", "f64"], returns: "void" },
  ledger_apply: { args: ["u32", "f64", "i32", "i32"], returns: "i32" },
  ledger_read: { args: ["u32", "buffer"], returns: "void" },
  ledger_source_hash: { args: [], returns: "ptr" },
  memlife_claim: { args: [], returns: "i32" },
  ledger_wait_init: { args: ["fn"], returns: "void" },
  ledger_answer: { args: ["u64", "i32"], returns: "void" },
  ledger_spin_from: { args: ["i32"], returns: "void" },
  // ffi/event-relay.c, in the same library (ffi/event-relay.ts).
  event_relay_init: { args: ["fn"], returns: "void" },
  event_relay_awaited: { args: ["buffer"], returns: "void" },
  event_slot_init: { args: ["i32", "fn", "i32", "u32"], returns: "ptr" },
  event_take: { args: ["buffer", "i32"], returns: "i32" },
  event_count: { args: ["i32"], returns: "f64" },
  // ffi/lane.c, for `sameThread` symbols (laneAsync).
  lane_symbol: { args: ["cstring", "cstring"], returns: "ptr" },
  lane_run: { args: ["ptr", "ptr"], returns: "u64", blocking: true },
  lane_submit: { args: ["ptr", "ptr", "fn", "u64"], returns: "i32" },
} as const satisfies SymbolTable;

export type NativeLedgerLibrary = NativeLibrary<typeof nativeLedgerSymbols>;

/** Where the library for `platform` (`linux-x64`, `linux-arm64`) is, or null when not on disk. */
export function nativeLedgerPath(platform: string): string | null {
  // A bundle may give this module no URL: esbuild's CommonJS output makes `import.meta` an empty
  // object (`new URL(..., undefined)` threw "Invalid URL" at the first callback). The library is
  // not beside a bundle anyway: the JS fallbacks serve (test/esbuild-bundle.spec.ts).
  const base: unknown = import.meta.url;
  if (typeof base !== "string") return null;
  const url = new URL(`./prebuilt/${platform}/libmemlife-ledger.so`, base);
  return url.protocol === "file:" ? decodeURIComponent(url.pathname) : null;
}

type Open = <T extends SymbolTable>(path: string, table: T, options?: OpenOptions) => NativeLibrary<T>;

/** The library, or null where it is absent or cannot be opened. */
export function openNativeLedger(open: Open, path: string | null): NativeLedgerLibrary | null {
  if (path === null) return null;
  try {
    return open(path, nativeLedgerSymbols);
  } catch {
    return null;
  }
}

/**
 * The library at `path()`, opened on the first call and the same after: the ledger and the event
 * relay (ffi/event-relay.ts) share it. `path()` gives null in a Worker: the library's accounts and
 * relay are process-wide, and each Worker has its own. Asked on first use only: a backend module
 * must load anywhere (src/backend.ts reports a mismatch).
 */
export function nativeLibraryOnce(open: Open, path: () => string | null): () => NativeLedgerLibrary | null {
  let asked = false;
  let lib: NativeLedgerLibrary | null = null;
  return () => {
    if (!asked) {
      asked = true;
      lib = openNativeLedger(open, path());
      // Its state is the process's: another realm of it (an isolate of `deno serve --parallel`, a
      // second copy of this module on the same file) claimed it first, so this one takes the fallbacks.
      if (lib !== null && lib.symbols.memlife_claim() !== 1) lib = null;
    }
    return lib;
  };
}

/** The C functions of ffi/ledger.c, as a backend binds them (Bun: from bun-relay.c; Deno, Node: the library). */
export interface LedgerCalls {
  ledger_init(relay: Callback): unknown;
  ledger_reset(id: number): number;
  ledger_set_forward(id: number, forward: number): void;
  ledger_set_budget(id: number, hasBudget: number, budget: number): void;
  ledger_apply(id: number, bytes: number, post: number, answer: number): number;
  ledger_read(id: number, out: Float64Array): void;
  /** The prebuilt library's (Deno, Node), for `ticketed` forwards (memlife-ledger.c). */
  ledger_wait_init?(waited: Callback): void;
  ledger_answer?(ticket: number | bigint, answer: number): void;
}

/**
 * The ledger over ffi/ledger.c's functions `h`. Forwarded calls go to `backend.callback(def)`,
 * which calls `forward` on the JS thread; JS answers them with `apply`. One per process: the C
 * side has one relay. `ticketed` (Deno): a call from another thread waits on a ticket that JS
 * answers as soon as `forward` returned, delivered through the event relay's burst callback,
 * instead of inside the runtime's thread-safe callback (ffi/prebuilt/memlife-ledger.c says why).
 */
export function nativeLedger(
  h: LedgerCalls,
  backend: Pick<Backend, "callback">,
  def: CallbackDef,
  forward: (id: number, bytes: number, post: boolean) => boolean,
  ticketed = false,
): MemoryLedger {
  const relay = backend.callback(
    def,
    ((id: number | bigint, bytes: number | bigint, post: boolean) => forward(Number(id), Number(bytes), post)) as (
      ...args: never[]
    ) => unknown,
  );
  const entry = h.ledger_init(relay);
  const answer = h.ledger_answer;
  if (ticketed && h.ledger_wait_init !== undefined && answer !== undefined) {
    const waited = backend.callback(
      { args: ["u32", "i64", "bool", "u64"], returns: "void", delivery: "event", burst: true },
      ((id: number, bytes: number | bigint, post: boolean, ticket: number | bigint) => {
        // Answered whatever happens, or the thread would wait for ever: a throw refuses, as a
        // thread-safe callback that throws answers 0.
        let allowed = false;
        try {
          allowed = forward(id, Number(bytes), post);
        } finally {
          answer(ticket, allowed ? 1 : 0);
        }
      }) as (...args: never[]) => unknown,
    );
    h.ledger_wait_init(waited);
  }
  const out = new Float64Array(8);
  return {
    callback: entry as unknown as Callback,
    settlesNatively: true,
    reset(id) {
      if (h.ledger_reset(id) !== 0) {
        throw new BackendError(`memlife: no memory for ledger account ${id}`, { errno: 12 });
      }
    },
    setForward: (id, on) => h.ledger_set_forward(id, on ? 1 : 0),
    setBudget: (id, budget) => h.ledger_set_budget(id, budget === null ? 0 : 1, budget ?? 0),
    apply: (id, bytes, post, answer) => h.ledger_apply(id, bytes, post ? 1 : 0, answer ? 1 : 0),
    read(id): LedgerFigures {
      h.ledger_read(id, out);
      return {
        bytes: out[0],
        peak: out[1],
        calls: out[2],
        denied: out[3],
        budgetDenied: out[4],
        native: out[5],
        lastRefused: out[6],
        lastRefusedLive: out[7],
      };
    },
  };
}

/**
 * `Backend.memoryLedger` for Deno and Node: the prebuilt `library()` where it opens (see
 * nativeLibraryOnce), else the JS ledger. One ledger per process (per Worker), as on Bun.
 */
export function ledgerMaker(
  library: () => NativeLedgerLibrary | null,
  callback: Backend["callback"],
  ticketed = false,
): Backend["memoryLedger"] {
  let made = false;
  return (def, forward) => {
    if (made) throw new RangeError("memlife: the memory ledger exists already (one per process)");
    const lib = library();
    const ledger = lib === null
      ? jsLedger(callback, def, forward)
      : nativeLedger(lib.symbols, { callback }, def, forward, ticketed);
    made = true;
    return ledger;
  };
}

/** What a backend gives laneAsync. */
export interface LaneHooks {
  /** The backend's callbacks: what the lanes report results to is an `event` one. */
  readonly callback: Backend["callback"];
  /** Runs as each call starts (Deno puts its exit listeners last again, as for its async calls). */
  readonly starting?: () => void;
}

/**
 * At most this many lane calls run at once; the rest wait in call order. Commits used to be capped
 * by the runtime's pool (Node's four libuv threads, Deno's 32): a thousand at once would build a
 * thousand scenes at once, with the memory of all of them, on as many threads.
 */
const LANE_CALLS = 32;
const laneQueue = new AsyncQueue(LANE_CALLS);

/** For tests: lane calls running and waiting for their turn in this process. */
export function laneCalls(): { running: number; queued: number; limit: number } {
  return { running: laneQueue.running, queued: laneQueue.queued, limit: LANE_CALLS };
}

/** Lane calls started and not yet settled, by id: what each resolves with its result. */
const lanePending = new Map<number, (result: unknown) => void>();
let laneNextId = 1;
/** The callback lanes report results to: one for the process, made on first use. */
let laneDone: Callback | undefined;
/** Holds the event loop open while a lane call is pending: nothing else of the runtime's does. */
let laneAlive: ReturnType<typeof setInterval> | undefined;

function laneSettled(id: number | bigint, result: unknown): void {
  const key = Number(id);
  const resolve = lanePending.get(key);
  if (resolve === undefined) return;
  lanePending.delete(key);
  if (lanePending.size === 0 && laneAlive !== undefined) {
    ownClearInterval(laneAlive);
    laneAlive = undefined;
  }
  resolve(result);
}

function stayAlive(): void {}

/**
 * The `async` binding of the `sameThread` symbol `name` (`def`) of the library opened from `path`:
 * lane_submit of the prebuilt library starts it on a lane and returns at once, so that no thread of
 * the runtime's pool waits meanwhile (Node has four, for file I/O and DNS too), and the lane calls
 * an `event` callback with the result. On Node that callback is the event relay's, whose caller
 * waits for JS to take it; on Deno, Deno's thread-safe callback, which waits the same way. The
 * lane is idle again by then, so a call JS makes as it learns of the result takes it (a `burst`
 * callback, handed to the relay thread instead, added that thread's wake-up: Node 1.3 -> 1.5-1.6
 * ms per 10k-triangle commit in 2 processes of 5). Where no lane can start, the runtime's async
 * call waits in lane_run instead. Undefined where the prebuilt library or the symbol's address cannot
 * be had, or the symbol takes more than one pointer or returns something else than nothing or a u64.
 */
export function laneAsync(
  lib: NativeLedgerLibrary | null,
  path: string,
  name: string,
  def: SymbolDef,
  hooks: LaneHooks,
): ((arg?: unknown) => Promise<unknown>) | undefined {
  const run = lib?.async.lane_run;
  const oneArgument = def.args.length === 0 || (def.args.length === 1 && def.args[0] === "ptr");
  if (lib == null || run === undefined || !oneArgument || (def.returns !== "void" && def.returns !== "u64")) {
    return undefined;
  }
  const address = lib.symbols.lane_symbol(path, name);
  if (address === null || address === undefined) return undefined;
  const done = laneDone ??= hooks.callback(
    { args: ["u64", "u64"], returns: "void", delivery: "event" },
    laneSettled as (...args: never[]) => unknown,
  );
  const submit = lib.symbols.lane_submit;
  const result = def.returns === "u64";
  return (arg) =>
    laneQueue.run(() => {
      hooks.starting?.();
      return new Promise((resolve, reject) => {
        const id = laneNextId++;
        lanePending.set(id, result ? resolve : () => resolve(undefined));
        let error: number;
        try {
          error = submit(address, arg ?? null, done, id);
        } catch (thrown) {
          lanePending.delete(id);
          reject(thrown);
          return;
        }
        if (error !== 0) {
          // No lane could start (no memory, no thread): the runtime's async call waits in lane_run,
          // which runs the call itself then.
          lanePending.delete(id);
          run(address, arg ?? null).then((value) => resolve(result ? value : undefined), reject);
          return;
        }
        laneAlive ??= ownSetInterval(stayAlive, 2 ** 30);
      });
    });
}
