/*
 * Native helpers for ffi/bun.ts, compiled at run time by Bun's embedded TinyCC (`cc` from
 * "bun:ffi"). Bun's FFI has two gaps this file fills:
 *
 * 1. No nonblocking calls. `async_submit` runs a native function on a lane (ffi/lane.c) and reports
 *    completion through a threadsafe JSCallback, so the JS thread stays free to answer callbacks
 *    (the Embree memory monitor, OpenCL event callbacks) while the call waits for them.
 * 2. A plain JSCallback hangs the process when it is called from another thread; a threadsafe
 *    one loses its return value and, even on the JS thread, is only queued (~1.5 us a call
 *    against ~0.1 us). The relay trampolines give native code one function pointer that works
 *    on any thread: on the JS thread they call a plain JSCallback directly, with its answer.
 *    On any other thread, an `event` slot hands a copy of the arguments to a threadsafe
 *    JSCallback and returns at once; a `sync` slot parks the arguments in a request on the
 *    caller's stack, hands the request to a threadsafe JSCallback and blocks until JS posts the
 *    answer with `relay_answer` (the arguments, e.g. a string, stay valid meanwhile).
 *
 * TinyCC has no <stdatomic.h>; everything shared between threads is guarded by pthread mutexes.
 *
 * Every native function we forward takes at most 9 integer/pointer arguments and returns an
 * integer, a pointer or nothing. Under the x86-64 and AArch64 SysV ABIs such a function can be
 * called through `uint64_t (*)(uint64_t x9)`: the extra arguments are ignored by the callee,
 * and narrow arguments only need their low bits right, which passing the caller's register
 * contents through untouched preserves.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---------------------------------------------------------------- value normalisation */

/*
 * Kinds of narrow values. A register holding an `int` or `bool` argument may carry garbage above
 * the declared width; JavaScript reads the full 64 bits, so we clean them up first.
 */
#define KIND_U64 0  /* pointers, size_t, ssize_t, 64-bit integers: passed as is */
#define KIND_I32 1  /* sign-extend the low 32 bits */
#define KIND_U32 2  /* zero-extend the low 32 bits */
#define KIND_BOOL 3 /* the low 8 bits, as 0 or 1 */
#define KIND_VOID 4 /* no value: 0 */

static uint64_t normalise(uint64_t v, int kind) {
  switch (kind) {
  case KIND_I32: return (uint64_t)(int64_t)(int32_t)(uint32_t)v;
  case KIND_U32: return (uint64_t)(uint32_t)v;
  case KIND_BOOL: return (v & 0xff) != 0;
  case KIND_VOID: return 0;
  default: return v;
  }
}

/* ---------------------------------------------------------------- async calls */

/* Threadsafe JSCallback: (id, low 32 bits, high 32 bits). 32-bit halves, because a 64-bit value
 * may need a BigInt, and nothing should be allocated on the JS heap from a foreign thread. */
typedef void (*done_fn)(uint32_t, uint32_t, uint32_t);

#include "lane.c"

typedef struct {
  lane_job job;
  uint32_t id;
} async_job;

static done_fn on_done;

/*
 * A Worker's relay has no `on_done`: a threadsafe JSCallback called after the Worker was
 * terminated crashes Bun, and nothing tells the Worker's code it is being terminated. Its lanes
 * keep completions here instead, and JS takes them with async_take while calls are in flight;
 * after a terminate nobody takes them, and nothing touches the dead isolate. Under lane_mu.
 */
static uint32_t *done_words; /* id, low 32 bits, high 32 bits per completion */
static int done_count, done_capacity;

static void keep_done(uint32_t id, uint64_t r) {
  if (done_count == done_capacity) {
    int n = done_capacity ? done_capacity * 2 : 64;
    uint32_t *grown = realloc(done_words, (size_t)n * 3 * sizeof(uint32_t));
    if (!grown) return; /* the call's promise stays pending rather than the process failing */
    done_words = grown;
    done_capacity = n;
  }
  uint32_t *w = done_words + 3 * done_count++;
  w[0] = id;
  w[1] = (uint32_t)r;
  w[2] = (uint32_t)(r >> 32);
}

/* Moves up to `max` kept completions into `out` (3 words each); returns how many. */
int async_take(uint32_t *out, int max) {
  pthread_mutex_lock(&lane_mu);
  int n = done_count < max ? done_count : max;
  memcpy(out, done_words, (size_t)n * 3 * sizeof(uint32_t));
  memmove(done_words, done_words + 3 * n, (size_t)(done_count - n) * 3 * sizeof(uint32_t));
  done_count -= n;
  pthread_mutex_unlock(&lane_mu);
  return n;
}

static void async_finish(lane_job *j, uint64_t r) {
  uint32_t id = ((async_job *)j)->id;
  free(j);
  if (on_done) {
    on_done(id, (uint32_t)r, (uint32_t)(r >> 32));
  } else {
    pthread_mutex_lock(&lane_mu);
    keep_done(id, r);
    pthread_mutex_unlock(&lane_mu);
  }
}

/* Runs fn on a lane (ffi/lane.c). Returns 0, or the error that left it unrun. */
int async_submit(void *fn, uint32_t id, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3,
                 uint64_t a4, uint64_t a5, uint64_t a6, uint64_t a7, uint64_t a8) {
  async_job *j = malloc(sizeof(async_job));
  if (!j) return 12; /* ENOMEM */
  j->job.fn = (lane_fn)fn;
  j->job.a[0] = a0; j->job.a[1] = a1; j->job.a[2] = a2; j->job.a[3] = a3; j->job.a[4] = a4;
  j->job.a[5] = a5; j->job.a[6] = a6; j->job.a[7] = a7; j->job.a[8] = a8;
  j->job.finish = async_finish;
  j->id = id;
  int err = lane_start(&j->job);
  if (err) free(j);
  return err;
}

int async_threads(void) {
  return lane_count();
}

/* ---------------------------------------------------------------- relay trampolines */

#define RELAY_ARGS 6   /* integer arguments a trampoline forwards (all in registers on both ABIs) */
#define RELAY_SLOTS 64 /* trampolines: one per callback made, for the life of the process */

typedef uint64_t (*direct_fn)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t);
/* `sync` slots. Threadsafe JSCallback: (request *). JS reads the arguments from the request and
 * calls relay_answer. */
typedef void (*notify_fn)(void *);
/* `event` slots. Threadsafe JSCallback with the callback's own arguments: Bun copies them and
 * the caller goes on at once. */
typedef void (*post_fn)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t);

#define MODE_SYNC 0
#define MODE_EVENT 1
/* A Worker's `sync` slot whose calls come from another thread only inside an async call (Embree's
 * error function, on a commit's lane): the request is kept in C, like the Worker's completions,
 * and JS takes it with relay_take as it polls them. A threadsafe JSCallback called after the Worker
 * was terminated crashes Bun; a kept request nobody takes leaves its thread parked, nothing more. */
#define MODE_KEPT 2
/* Or'ed into relay_slot_init's mode: an `event` callback, which a deferring call may queue (see defer_call). */
#define MODE_DEFERRABLE 0x100

typedef struct {
  direct_fn direct;
  void *notify;
  int mode;
  int deferrable;
  int arg_kind[RELAY_ARGS];
  int ret_kind;
} relay_slot;

/* Lives on the stack of the foreign thread, which is blocked until JS answered. */
typedef struct {
  uint64_t args[RELAY_ARGS]; /* offset 0: JS reads them with bun:ffi `read` */
  uint64_t answer;
  int done;
  pthread_cond_t cond;
} relay_request;

static relay_slot slots[RELAY_SLOTS];
/* MODE_KEPT requests not yet taken by JS: slot, request, per entry. Under relay_mu. */
static uint64_t *kept_words;
static int kept_count, kept_capacity;
/* How long a foreign thread awaits its answer spinning before it sleeps: RELAY_SPIN_NS with
 * RELAY_SPARE_CPUS or more (memlife_init), else 0. A TBB worker awaiting the memory monitor holds an Embree allocator
 * lock the other workers spin on, so its wake-up costs twice: on the H100 host, 10k triangles,
 * 29-34 -> 10-17 us a call with 16 CPUs, 29-34 -> 17-27 with 8 (test/device/results/
 * bun-monitor-spin-ab-h100-2026-11-27.txt). With fewer, a spinning thread takes a core the JS
 * thread needs (Deno's ticket measured 24-28 -> 47-59 us with 4, ffi/prebuilt/memlife-ledger.c). */
static long relay_spin_ns;
static int relay_cpus; /* the process's CPUs, as memlife_init was told */
#define RELAY_SPIN_NS 200000
#define RELAY_SPARE_CPUS 8
static pthread_t js_thread;
static pthread_mutex_t relay_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t direct_calls; /* only touched on the JS thread */
static uint64_t relayed_calls; /* under relay_mu */

/* TinyCC does not inline: skip the call for the common kind. */
#define NORM(v, k) ((k) == KIND_U64 ? (v) : normalise((v), (k)))

/* The slow path, kept out of relay() so that the JS-thread path stays short. */
static uint64_t relay_foreign(relay_slot *s, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3,
                              uint64_t a4, uint64_t a5) {
  int *k = s->arg_kind;
  relay_request r;
  r.args[0] = NORM(a0, k[0]);
  r.args[1] = NORM(a1, k[1]);
  r.args[2] = NORM(a2, k[2]);
  r.args[3] = NORM(a3, k[3]);
  r.args[4] = NORM(a4, k[4]);
  r.args[5] = NORM(a5, k[5]);

  pthread_mutex_lock(&relay_mu);
  relayed_calls++;
  pthread_mutex_unlock(&relay_mu);

  if (s->mode == MODE_EVENT) {
    /* Bun copies the arguments and queues the call; nothing to wait for. */
    ((post_fn)s->notify)(r.args[0], r.args[1], r.args[2], r.args[3], r.args[4], r.args[5]);
    return 0;
  }

  r.answer = 0;
  r.done = 0;
  pthread_cond_init(&r.cond, 0);
  if (s->mode == MODE_KEPT) {
    pthread_mutex_lock(&relay_mu);
    if (kept_count == kept_capacity) {
      int n = kept_capacity ? kept_capacity * 2 : 16;
      uint64_t *grown = realloc(kept_words, (size_t)n * 2 * sizeof(uint64_t));
      if (!grown) { /* no memory to keep it: the call goes unanswered (0) rather than parked for ever */
        pthread_mutex_unlock(&relay_mu);
        pthread_cond_destroy(&r.cond);
        return 0;
      }
      kept_words = grown;
      kept_capacity = n;
    }
    kept_words[2 * kept_count] = (uint64_t)(s - slots);
    kept_words[2 * kept_count + 1] = (uint64_t)(uintptr_t)&r;
    kept_count++;
    pthread_mutex_unlock(&relay_mu);
  } else {
    /* Queued on the JS thread's event loop; returns at once. */
    ((notify_fn)s->notify)(&r);
  }
  if (relay_spin_ns > 0) {
    /* Where cores are to spare, the answer is awaited awake for a while: no wake-up to pay. A
     * volatile read (TinyCC has no atomics); the answer itself is read under relay_mu below. */
    volatile int *done = &r.done;
    struct timespec from, now;
    clock_gettime(CLOCK_MONOTONIC, &from);
    for (;;) {
      if (*done) break;
      clock_gettime(CLOCK_MONOTONIC, &now);
      if ((now.tv_sec - from.tv_sec) * 1000000000L + (now.tv_nsec - from.tv_nsec) >= relay_spin_ns) break;
    }
  }
  pthread_mutex_lock(&relay_mu);
  while (!r.done) pthread_cond_wait(&r.cond, &relay_mu);
  uint64_t v = r.answer;
  pthread_mutex_unlock(&relay_mu);
  pthread_cond_destroy(&r.cond);
  return NORM(v, s->ret_kind);
}

/* ---------------------------------------------------------------- deferred callbacks */

#include "deferred.c"

static uint64_t relay(int n, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4,
                      uint64_t a5) {
  relay_slot *s = &slots[n];
  if (!pthread_equal(pthread_self(), js_thread)) return relay_foreign(s, a0, a1, a2, a3, a4, a5);
  int *k = s->arg_kind;
  if (s->deferrable &&
      deferred_push(n, NORM(a0, k[0]), NORM(a1, k[1]), NORM(a2, k[2]), NORM(a3, k[3]), NORM(a4, k[4]),
                    NORM(a5, k[5]))) {
    direct_calls++;
    return 0;
  }
  direct_calls++;
  uint64_t v = s->direct(NORM(a0, k[0]), NORM(a1, k[1]), NORM(a2, k[2]), NORM(a3, k[3]),
                         NORM(a4, k[4]), NORM(a5, k[5]));
  return NORM(v, s->ret_kind);
}

/* Moves up to `max` kept requests into `out` (slot, request: 2 words each); returns how many. JS
 * answers each with relay_answer. */
int relay_take(uint64_t *out, int max) {
  pthread_mutex_lock(&relay_mu);
  int n = kept_count < max ? kept_count : max;
  memcpy(out, kept_words, (size_t)n * 2 * sizeof(uint64_t));
  memmove(kept_words, kept_words + 2 * n, (size_t)(kept_count - n) * 2 * sizeof(uint64_t));
  kept_count -= n;
  pthread_mutex_unlock(&relay_mu);
  return n;
}

/* Called by JS (on the JS thread) with the answer to a relayed request. */
void relay_answer(void *request, uint64_t value) {
  relay_request *r = request;
  pthread_mutex_lock(&relay_mu);
  r->answer = value;
  r->done = 1;
  /* Signalled under the lock: the waiter cannot destroy the condition before we are done. */
  pthread_cond_signal(&r->cond);
  pthread_mutex_unlock(&relay_mu);
}

#define TRAMPOLINE(n)                                                                            \
  static uint64_t trampoline_##n(uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4, \
                                 uint64_t a5) {                                                   \
    return relay(n, a0, a1, a2, a3, a4, a5);                                                      \
  }
#define TRAMPOLINES8(n)                                                                           \
  TRAMPOLINE(n##0) TRAMPOLINE(n##1) TRAMPOLINE(n##2) TRAMPOLINE(n##3) TRAMPOLINE(n##4)            \
  TRAMPOLINE(n##5) TRAMPOLINE(n##6) TRAMPOLINE(n##7)
TRAMPOLINES8(0) TRAMPOLINES8(1) TRAMPOLINES8(2) TRAMPOLINES8(3)
TRAMPOLINES8(4) TRAMPOLINES8(5) TRAMPOLINES8(6) TRAMPOLINES8(7)
#define T8(n)                                                                                     \
  trampoline_##n##0, trampoline_##n##1, trampoline_##n##2, trampoline_##n##3, trampoline_##n##4, \
  trampoline_##n##5, trampoline_##n##6, trampoline_##n##7
static void *const trampolines[RELAY_SLOTS] = {T8(0), T8(1), T8(2), T8(3), T8(4), T8(5), T8(6), T8(7)};

/*
 * Fill slot n and return its trampoline. `kinds` packs one KIND_* per argument, 4 bits each,
 * argument 0 in the lowest bits. Called once per slot, before the pointer is handed out.
 */
void *relay_slot_init(int n, int mode, void *direct, void *notify, int nargs, uint32_t kinds,
                      int ret_kind) {
  if (n < 0 || n >= RELAY_SLOTS || nargs > RELAY_ARGS) return 0;
  relay_slot *s = &slots[n];
  s->mode = mode & ~MODE_DEFERRABLE;
  s->deferrable = (mode & MODE_DEFERRABLE) != 0;
  s->direct = (direct_fn)direct;
  s->notify = notify;
  /* Arguments past nargs are passed through as they are (KIND_U64 is 0); nobody reads them. */
  for (int i = 0; i < RELAY_ARGS; i++) s->arg_kind[i] = i < nargs ? (kinds >> (4 * i)) & 0xf : KIND_U64;
  s->ret_kind = ret_kind;
  return trampolines[n];
}

/* 0: calls answered directly on the JS thread; 1: calls relayed from other threads. */
double relay_count(int which) {
  if (which == 0) return (double)direct_calls;
  pthread_mutex_lock(&relay_mu);
  double n = (double)relayed_calls;
  pthread_mutex_unlock(&relay_mu);
  return n;
}

/* Called once, on the JS thread, before any trampoline or async call is used. */
/* Seconds a Worker's idle lane waits for work before it leaves (lane.c). */
#define WORKER_LANE_IDLE_SECONDS 2

void memlife_init(void *done, int cpus) {
  js_thread = pthread_self();
  on_done = (done_fn)done;
  if (!done) { /* a Worker (see keep_done) */
    pthread_mutex_lock(&lane_mu);
    lanes_kept = 0;
    lane_idle_seconds = WORKER_LANE_IDLE_SECONDS;
    pthread_mutex_unlock(&lane_mu);
  }
  relay_cpus = cpus;
  relay_spin_ns = cpus >= RELAY_SPARE_CPUS ? RELAY_SPIN_NS : 0;
}

/* For tests: spin from `from` CPUs on (RELAY_SPARE_CPUS by default), so that a machine with few
 * CPUs can run the spinning path too. On the JS thread, while no foreign call waits. */
void relay_spin_from(int from) {
  relay_spin_ns = relay_cpus >= from ? RELAY_SPIN_NS : 0;
}

/* ---------------------------------------------------------------- memory ledger */

/* The ledger is shared with Deno's and Node's prebuilt library (ffi/prebuilt/): one copy of the
 * counting rule. A forwarding account's call goes to a relay slot's trampoline. */
static uint64_t ledger_forward(void *relay, uint64_t id, uint64_t bytes, uint64_t post) {
  return ((direct_fn)relay)(id, bytes, post & 0xff, 0, 0, 0) != 0;
}

#include "ledger.c"
