/*
 * The event relay of Deno and Node: OpenCL's `void` callbacks arriving on threads other than the
 * JS thread (NVIDIA calls every destructor, SVM free and event status callback on a driver thread;
 * PoCL calls SVM frees on its worker). Deno's thread-safe callbacks and koffi's registered ones park
 * the calling thread until the JS thread has run the call. Here a call is queued and the JS thread
 * takes every queued call at once (`event_take`), asked by one of two deliverers, per slot:
 *
 * - a burst slot (an SVM free: one call per allocation, in a row, from the thread that does the
 *   queue's work) has the relay thread deliver, and the caller goes on at once. PoCL on 2 cores,
 *   Node: enqueueSVMFree with onFree 3.4 us a free, against 62 us when the worker waited for each.
 * - any other slot (Node only: Deno keeps its own callbacks for those, ffi/deno.ts says why) has
 *   its caller deliver, if no delivery is under way, and wait for that one round trip (what other
 *   threads queue meanwhile is the relay thread's); other callers go on. On an H100 a destructor
 *   reached an awaiting JS thread in 14-16 us so (Node), against 30-34 us through the relay
 *   thread: the driver thread, free again at once, had to be woken for the next release.
 *   Unless the program awaits more than one callback: then the calls are most likely a driver
 *   thread's backlog (the destructors of buffers released back to back), and a round trip each
 *   would serialize them on the JS thread's wake-ups. Such a call is queued for the relay thread,
 *   as a burst slot's is, and its caller goes on. test/native/thread-driver.c, calling every
 *   destructor from one thread, on this repository's 2-core VM (a wake-up costs 47 us): 50 us a
 *   buffer, 0.8-0.9 us so. On the H100 it changed nothing: NVIDIA calls from several threads,
 *   whose calls the relay already took in 54-56 deliveries for 300k.
 *
 * On the JS thread itself (PoCL calls destructors inside clReleaseMemObject) a slot calls its JS
 * callback directly, inside the native call, as without the relay; inside a deferring call
 * (ffi/deferred.c, Node's bindings of `reentrant` symbols) JS runs it as that call returns. Where the queue cannot grow or
 * the relay thread cannot start, a slot falls back to its JS callback from the calling thread,
 * which then waits as it would without the relay: slower, nothing lost.
 *
 * Included by ffi/prebuilt/memlife-ledger.c. Integer and pointer arguments only, as in ledger.c.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EVENT_ARGS 4   /* the widest OpenCL callback: pfn_free_func's 4 */
#define EVENT_SLOTS 16 /* trampolines: one per event callback kind, for the life of the process */
#define EVENT_WORDS (1 + EVENT_ARGS) /* a queued call: its slot, then its arguments */

/* How a narrow argument is cleaned before JS reads all 64 bits (garbage may sit above its width). */
#define EVENT_U64 0
#define EVENT_I32 1
#define EVENT_U32 2
#define EVENT_BOOL 3
/* In event_slot_init's `kinds`, above the arguments' kinds: the relay thread delivers this slot's calls. */
#define EVENT_BURST (1u << 16)

/* The JS callback of a slot, called through its integer-register form (see bun-relay.c). */
typedef void (*event_direct_fn)(uint64_t, uint64_t, uint64_t, uint64_t);
typedef void (*event_wake_fn)(void);

typedef struct {
  event_direct_fn direct;
  int kind[EVENT_ARGS];
  int burst;
} event_slot;

static event_slot event_slots[EVENT_SLOTS];
static pthread_t event_js_thread;
static event_wake_fn event_wake; /* JS's thread-safe callback: take what is queued */

static pthread_mutex_t event_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t event_cv = PTHREAD_COND_INITIALIZER;
/* Queued calls, EVENT_WORDS words each, from event_first to event_first + event_len. Under event_mu. */
static uint64_t *event_queue;
static size_t event_first, event_len, event_capacity;
static int event_thread_state; /* 0 not started, 1 running, -1 could not start */
static int event_delivering;    /* a thread is in event_wake: the calls queued meanwhile are its to deliver */
/* Under event_mu but the first. */
static double event_direct_calls, event_queued_calls, event_fallback_calls, event_deliveries, event_several_calls;

/*
 * How many native callbacks the program awaits, as JS keeps it (event_relay_awaited; read relaxed,
 * a hint). With more than one, a caller of a non-burst slot leaves its call to the relay thread
 * (see above); with one, that call is the one the program waits for, which its caller delivers
 * faster than the relay thread, a wake-up later.
 */
static const int32_t *event_awaited;

static int event_start(void);

/*
 * Under event_mu, with calls queued and no delivery under way: asks JS to take them, again while
 * more were queued meanwhile. A caller (not the relay thread) asks once, which takes its own call,
 * and leaves what came meanwhile to the relay thread, so that no caller waits for other threads'
 * calls; only where that thread cannot start does it go on asking.
 */
static void event_deliver(int caller) {
  event_delivering = 1;
  do {
    event_deliveries++;
    pthread_mutex_unlock(&event_mu);
    event_wake();
    pthread_mutex_lock(&event_mu);
  } while (event_len > 0 && !(caller && event_start()));
  event_delivering = 0;
  if (event_len > 0) pthread_cond_signal(&event_cv);
}

static uint64_t event_clean(uint64_t v, int kind) {
  switch (kind) {
  case EVENT_I32: return (uint64_t)(int64_t)(int32_t)(uint32_t)v;
  case EVENT_U32: return (uint64_t)(uint32_t)v;
  case EVENT_BOOL: return (v & 0xff) != 0;
  default: return v;
  }
}

/* Room for one more call at the queue's end; 0 where memory ran out. Under event_mu. */
static int event_room(void) {
  if (event_first + event_len < event_capacity) return 1;
  if (event_first > 0) {
    memmove(event_queue, event_queue + EVENT_WORDS * event_first, EVENT_WORDS * event_len * sizeof(uint64_t));
    event_first = 0;
    if (event_len < event_capacity) return 1;
  }
  size_t n = event_capacity ? event_capacity * 2 : 256;
  uint64_t *grown = realloc(event_queue, EVENT_WORDS * n * sizeof(uint64_t));
  if (!grown) return 0;
  event_queue = grown;
  event_capacity = n;
  return 1;
}

/*
 * Until when (CLOCK_MONOTONIC, ns) the relay thread stays awake for the next call instead of
 * sleeping: a caller that expects more calls soon sets it (ffi/prebuilt/memlife-ledger.c, for a
 * monitored Embree build), so that their delivery does not wait for the thread's wake-up. Set
 * with __atomic builtins, as is event_queued_hint, which a queued call sets for the spinning thread.
 */
static int64_t event_awake_until;
static int event_queued_hint;

static int64_t event_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void event_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* Under event_mu, released meanwhile: spins while nothing is queued, until event_awake_until.
 * Returns 0 at once where the thread is not to stay awake. */
static int event_stay(void) {
  int64_t until = __atomic_load_n(&event_awake_until, __ATOMIC_RELAXED);
  if (event_now_ns() >= until) return 0;
  __atomic_store_n(&event_queued_hint, 0, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&event_mu);
  while (!__atomic_load_n(&event_queued_hint, __ATOMIC_ACQUIRE) && event_now_ns() < until) event_pause();
  pthread_mutex_lock(&event_mu);
  return 1;
}

/* The relay thread: delivers the calls queued while no other thread was delivering. */
static void *event_main(void *unused) {
  (void)unused;
  pthread_mutex_lock(&event_mu);
  for (;;) {
    while (event_len == 0 || event_delivering) {
      if (!event_delivering && event_stay()) continue;
      pthread_cond_wait(&event_cv, &event_mu);
    }
    event_deliver(0);
  }
  return 0;
}

/* Under event_mu. Returns whether the relay thread runs. */
static int event_start(void) {
  if (event_thread_state == 0) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    event_thread_state = pthread_create(&t, &attr, event_main, 0) == 0 ? 1 : -1;
    pthread_attr_destroy(&attr);
  }
  return event_thread_state == 1;
}

/* Whether the program awaits more than one callback (see above). */
static int event_awaiting_several(void) {
  return event_awaited != NULL && __atomic_load_n(event_awaited, __ATOMIC_RELAXED) > 1;
}

#include "deferred.c"

static void event_relay(int n, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3) {
  event_slot *s = &event_slots[n];
  if (pthread_equal(pthread_self(), event_js_thread)) {
    event_direct_calls++;
    /* Inside a deferring call (ffi/deferred.c) JS runs it as that call returns; else now. */
    int *k = s->kind;
    if (!deferred_push(n, event_clean(a0, k[0]), event_clean(a1, k[1]), event_clean(a2, k[2]), event_clean(a3, k[3]), 0, 0)) {
      s->direct(a0, a1, a2, a3);
    }
    return;
  }
  pthread_mutex_lock(&event_mu);
  int several = !s->burst && event_awaiting_several() && event_start();
  if ((s->burst && !event_start()) || !event_room()) {
    event_fallback_calls++;
    pthread_mutex_unlock(&event_mu);
    s->direct(a0, a1, a2, a3);
    return;
  }
  uint64_t *w = event_queue + EVENT_WORDS * (event_first + event_len++);
  w[0] = (uint64_t)n;
  w[1] = event_clean(a0, s->kind[0]);
  w[2] = event_clean(a1, s->kind[1]);
  w[3] = event_clean(a2, s->kind[2]);
  w[4] = event_clean(a3, s->kind[3]);
  event_queued_calls++;
  if (several) event_several_calls++;
  __atomic_store_n(&event_queued_hint, 1, __ATOMIC_RELEASE);
  if (!event_delivering) {
    if (s->burst || several) pthread_cond_signal(&event_cv);
    else event_deliver(1);
  }
  pthread_mutex_unlock(&event_mu);
}

#define EVENT_TRAMPOLINE(n)                                                               \
  static void event_trampoline_##n(uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3) { \
    event_relay(n, a0, a1, a2, a3);                                                        \
  }
EVENT_TRAMPOLINE(0) EVENT_TRAMPOLINE(1) EVENT_TRAMPOLINE(2) EVENT_TRAMPOLINE(3)
EVENT_TRAMPOLINE(4) EVENT_TRAMPOLINE(5) EVENT_TRAMPOLINE(6) EVENT_TRAMPOLINE(7)
EVENT_TRAMPOLINE(8) EVENT_TRAMPOLINE(9) EVENT_TRAMPOLINE(10) EVENT_TRAMPOLINE(11)
EVENT_TRAMPOLINE(12) EVENT_TRAMPOLINE(13) EVENT_TRAMPOLINE(14) EVENT_TRAMPOLINE(15)
static void *const event_trampolines[EVENT_SLOTS] = {
  event_trampoline_0, event_trampoline_1, event_trampoline_2, event_trampoline_3,
  event_trampoline_4, event_trampoline_5, event_trampoline_6, event_trampoline_7,
  event_trampoline_8, event_trampoline_9, event_trampoline_10, event_trampoline_11,
  event_trampoline_12, event_trampoline_13, event_trampoline_14, event_trampoline_15,
};

/* Once, on the JS thread, before any slot: `wake` is JS's callback that takes the queue. */
void event_relay_init(void *wake) {
  event_js_thread = pthread_self();
  event_wake = (event_wake_fn)wake;
}

/* Once, on the JS thread: the int32 where JS counts the callbacks it awaits, valid for the process. */
void event_relay_awaited(const int32_t *word) { event_awaited = word; }

/*
 * Fills slot n and returns its trampoline (NULL for a bad slot or arity). `kinds` packs one
 * EVENT_* per argument, 4 bits each, argument 0 lowest, and EVENT_BURST for a slot the relay
 * thread delivers. Once per slot, before the pointer is out.
 */
void *event_slot_init(int n, void *direct, int nargs, uint32_t kinds) {
  if (n < 0 || n >= EVENT_SLOTS || nargs < 0 || nargs > EVENT_ARGS || !direct) return 0;
  event_slot *s = &event_slots[n];
  s->direct = (event_direct_fn)direct;
  for (int i = 0; i < EVENT_ARGS; i++) s->kind[i] = i < nargs ? (kinds >> (4 * i)) & 0xf : EVENT_U64;
  s->burst = (kinds & EVENT_BURST) != 0;
  return event_trampolines[n];
}

/* Moves up to `max` queued calls into `out` (EVENT_WORDS words each); returns how many. */
int event_take(uint64_t *out, int max) {
  pthread_mutex_lock(&event_mu);
  size_t n = max < 0 ? 0 : (size_t)max < event_len ? (size_t)max : event_len;
  if (n > 0) memcpy(out, event_queue + EVENT_WORDS * event_first, EVENT_WORDS * n * sizeof(uint64_t));
  event_first = n == event_len ? 0 : event_first + n;
  event_len -= n;
  pthread_mutex_unlock(&event_mu);
  return (int)n;
}

/*
 * 0: calls run directly on the JS thread; 1: queued from other threads; 2: fallen back to the JS
 * callback on the calling thread; 3: deliveries (JS asked to take the queue); 4: calls of non-burst
 * slots queued for the relay thread because the program awaited several callbacks.
 */
double event_count(int which) {
  pthread_mutex_lock(&event_mu);
  double n = which == 0 ? event_direct_calls : which == 1 ? event_queued_calls : which == 2 ? event_fallback_calls
    : which == 3 ? event_deliveries : event_several_calls;
  pthread_mutex_unlock(&event_mu);
  return n;
}
