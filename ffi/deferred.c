/*
 * Deferred calls: `event` callbacks a native call makes on the JS thread, run by JS as that call
 * returns instead of entered inside it. Included by ffi/bun-relay.c (Bun, compiled by TinyCC) and
 * ffi/event-relay.c (the prebuilt library of Deno and Node); ffi/deferred.ts is the JS side.
 *
 * Entering a JS callback from C on the JS thread, as PoCL calls a destructor inside
 * clReleaseMemObject, costs more than queueing the call here and running it from JS after the
 * native call (bench/callback-entry.ts: a hostPtr buffer awaited until destroyed, Bun 308 against
 * 244 ns, Node 714 against 611). Inside a call made through `defer_call` (the backends bind the
 * `reentrant` symbols so), an `event` slot called on the JS thread queues its arguments with
 * `deferred_push`, and JS runs the queued calls before the binding returns: the program sees them
 * run within the call, as before, and never while the driver is inside it. `event` arguments need
 * not outlive the call (from another thread they are copies already). JS-thread state only: no lock.
 */
#include <stdint.h>
#include <stdlib.h>

#define DEFERRED_ARGS 6

typedef struct {
  uint64_t args[DEFERRED_ARGS];
  uint32_t slot;
  uint32_t pad;
} deferred_call; /* 56 bytes: JS reads the queue as 32-bit words (ffi/deferred.ts) */
/*
 * The queue, oldest first. A deferring call made by a callback JS runs from it queues after the
 * calls still waiting and JS runs only its own before that call returns, so the queue only ever
 * shrinks from its end. It doubles when full (a failed user event can fail thousands of commands
 * inside one call, each with its event callback); only where malloc fails is a call entered at
 * once instead, ahead of those queued.
 */
static deferred_call *deferred;
static int defer_depth; /* defer_call frames on the JS thread's stack */
/* [0] calls queued; [1] defer_call frames plus JS's runs of the queue in progress (JS adds its
 * own), which tells a deferring call whether calls queued before it are another's; [2] the
 * queue's capacity (JS makes its view again when it changed). JS reads and writes them through a
 * view: no FFI call. */
static int32_t deferred_state[3];

static int deferred_grow(void) {
  int n = deferred_state[2] ? deferred_state[2] * 2 : 64;
  deferred_call *grown = realloc(deferred, (size_t)n * sizeof(deferred_call));
  if (!grown) return 0;
  deferred = grown;
  deferred_state[2] = n;
  return 1;
}

/* On the JS thread: queues slot n's call when a deferring call is under way (1), else 0: enter it. */
static int deferred_push(int n, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5) {
  if (defer_depth == 0 || (deferred_state[0] == deferred_state[2] && !deferred_grow())) return 0;
  deferred_call *d = &deferred[deferred_state[0]];
  d->args[0] = a0;
  d->args[1] = a1;
  d->args[2] = a2;
  d->args[3] = a3;
  d->args[4] = a4;
  d->args[5] = a5;
  d->slot = (uint32_t)n;
  deferred_state[0]++;
  return 1;
}

typedef uint64_t (*deferred_call5_fn)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t);

/*
 * Calls fn (at most 5 integer or pointer arguments, in registers, which the backend binds with the
 * symbol's own types) with `event` slots deferred.
 */
uint64_t defer_call(void *fn, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4) {
  defer_depth++;
  deferred_state[1]++;
  uint64_t v = ((deferred_call5_fn)fn)(a0, a1, a2, a3, a4);
  deferred_state[1]--;
  defer_depth--;
  return v;
}

/* What JS's views cover: 0 the state, 1 the queue (moved when it grows). */
void *deferred_memory(int which) {
  return which == 0 ? (void *)deferred_state : (void *)deferred;
}
