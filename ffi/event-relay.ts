/**
 * Event callbacks on Deno and Node through ffi/event-relay.c (in the prebuilt library), for the
 * `void` callbacks native code calls from other threads (NVIDIA calls every destructor, SVM free
 * and event status callback on a driver thread, PoCL its SVM frees on a worker). A `burst`
 * callback's caller goes on at once and the relay thread asks JS to take every queued call; any
 * other's caller asks JS itself and waits, unless the program awaits several callbacks
 * (ffi/event-relay.c says why): then it goes on, as a burst caller (Node); or it keeps the
 * runtime's own callback (Deno, where that was faster: ffi/deno.ts). The runtime's own callback
 * stays what runs on the JS thread and what a slot falls back to; where the library is absent
 * (another platform, a Worker) every callback is the runtime's own.
 */
import type { Deferral } from "./deferred.ts";
import type { Backend, Callback, CallbackDef, NativeType } from "./types.ts";
import type { NativeLedgerLibrary } from "./native-ledger.ts";

/** Must match EVENT_ARGS, EVENT_SLOTS and the EVENT_* kinds of ffi/event-relay.c. */
const EVENT_ARGS = 4;
const EVENT_SLOTS = 16;
const EVENT_WORDS = 1 + EVENT_ARGS;
const KIND: Partial<Record<NativeType, number>> = { i32: 1, u32: 2, bool: 3 };
const EVENT_BURST = 1 << 16;
/** Calls taken per `event_take`. */
const BATCH = 256;

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const MIN_SAFE = -MAX_SAFE;

/** A queued argument (cleaned to 64 bits by C) in the form the runtime's own callback gives it. */
function reader(type: NativeType, fromAddress: Backend["fromAddress"]): (word: bigint) => unknown {
  switch (type) {
    case "ptr":
    case "buffer":
    case "cstring":
    case "fn":
      return fromAddress;
    case "bool":
      return (word) => word !== 0n;
    case "i32":
    case "i64":
    case "isize":
      return (word) => {
        const v = BigInt.asIntN(64, word);
        return v >= MIN_SAFE && v <= MAX_SAFE ? Number(v) : v;
      };
    default:
      return (word) => (word <= MAX_SAFE ? Number(word) : word);
  }
}

/**
 * Counts of ffi/event-relay.c: calls run on the JS thread, queued from other threads, fallen back
 * to the runtime's own callback; deliveries (a thread waiting while JS took the queue); and calls
 * of non-burst slots left to the relay thread because the program awaited several callbacks.
 */
export interface EventRelayCounts {
  direct: number;
  queued: number;
  fallback: number;
  deliveries: number;
  several: number;
}

/**
 * `Backend.callback` over the runtime's own `plain` one: `event` callbacks get a relay slot of
 * the library that `library()` opens (asked once, on the first such callback); with `others`
 * "plain", only `burst` ones do. The rest stay plain. `awaited` is `Backend.callbacksAwaited`.
 * `counts()` is null until a relay exists.
 */
export function relayedCallbacks(
  library: () => NativeLedgerLibrary | null,
  plain: Backend["callback"],
  fromAddress: Backend["fromAddress"],
  others: "relay" | "plain",
  awaited: Backend["callbacksAwaited"],
  deferral: () => Deferral | null = () => null,
): { callback: Backend["callback"]; counts(): EventRelayCounts | null } {
  let asked = false;
  let h: NativeLedgerLibrary["symbols"] | null = null;
  const handlers: ((at: number) => void)[] = [];
  const words = new BigUint64Array(EVENT_WORDS * BATCH);

  // Runs on the JS thread when a deliverer asks: takes everything queued. A handler's throw
  // is swallowed, as the runtime's own callbacks swallow it (the core catches first), so that
  // the calls after it in the batch still run.
  function take(): void {
    for (;;) {
      const n = h!.event_take(words, BATCH);
      for (let i = 0; i < n; i++) {
        const at = i * EVENT_WORDS;
        try {
          handlers[Number(words[at])](at + 1);
        } catch {
          // See above.
        }
      }
      if (n < BATCH) return;
    }
  }

  function relay(): NativeLedgerLibrary["symbols"] | null {
    if (!asked) {
      asked = true;
      const lib = library();
      if (lib !== null) {
        lib.symbols.event_relay_init(plain({ args: [], returns: "void", delivery: "sync" }, take));
        lib.symbols.event_relay_awaited(awaited);
        h = lib.symbols;
      }
    }
    return h;
  }

  function callback(def: CallbackDef, fn: (...args: never[]) => unknown): Callback {
    const direct = plain(def, fn);
    if (def.delivery !== "event" || def.returns !== "void" || def.args.length > EVENT_ARGS) return direct;
    if (def.burst !== true && others === "plain") return direct;
    const s = relay();
    if (s === null || handlers.length === EVENT_SLOTS) return direct;
    let kinds = 0;
    def.args.forEach((t, i) => {
      kinds |= (KIND[t] ?? 0) << (4 * i);
    });
    if (def.burst === true) kinds |= EVENT_BURST;
    const trampoline = s.event_slot_init(handlers.length, direct, def.args.length, kinds);
    if (trampoline === null) return direct;
    const f = fn as (...args: unknown[]) => unknown;
    // The calls this slot makes on the JS thread inside a deferring call (ffi/deferred.c).
    deferral()?.slot(handlers.length, def.args, f);
    const read = def.args.map((t) => reader(t, fromAddress));
    // Spelled out per arity: no array per call.
    switch (read.length) {
      case 0:
        handlers.push(() => f());
        break;
      case 1:
        handlers.push((at) => f(read[0](words[at])));
        break;
      case 2:
        handlers.push((at) => f(read[0](words[at]), read[1](words[at + 1])));
        break;
      case 3:
        handlers.push((at) => f(read[0](words[at]), read[1](words[at + 1]), read[2](words[at + 2])));
        break;
      default:
        handlers.push((at) =>
          f(read[0](words[at]), read[1](words[at + 1]), read[2](words[at + 2]), read[3](words[at + 3]))
        );
    }
    return trampoline as unknown as Callback;
  }

  return {
    callback,
    counts: () =>
      h === null ? null : {
        direct: h.event_count(0),
        queued: h.event_count(1),
        fallback: h.event_count(2),
        deliveries: h.event_count(3),
        several: h.event_count(4),
      },
  };
}
