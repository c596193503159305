/*
 * Native code that calls a JS callback the way an OpenCL driver does, for test/event-relay.spec.ts:
 * `void (*)(void *object, int32_t status, void *user_data)` (clSetEventCallback's pfn_notify), on
 * the caller's thread or from threads of its own that never wait for anything but the call.
 */
#include <pthread.h>
#include <stdint.h>

typedef void (*notify_fn)(void *, int32_t, uintptr_t);

#define MAX_THREADS 64
typedef struct {
  notify_fn fn;
  int thread, calls;
} caller;

static caller callers[MAX_THREADS];
static pthread_t threads[MAX_THREADS];
static int started;
static int finished; /* atomically */

/* Call i of thread t: object 0x10000 * (t + 1) + i, status -(t * 100000 + i) - 1, id t * 100000 + i. */
static void *run(void *p) {
  caller *c = p;
  for (int i = 0; i < c->calls; i++) {
    int64_t n = (int64_t)c->thread * 100000 + i;
    c->fn((void *)(uintptr_t)(0x10000 * (c->thread + 1) + i), (int32_t)(-n - 1), (uintptr_t)n);
  }
  __atomic_add_fetch(&finished, 1, __ATOMIC_SEQ_CST);
  return 0;
}

/* Starts `n` threads that call `calls` times each, `even` or `odd` by their index; returns how many started. */
int callers_start(void *even, void *odd, int n, int calls) {
  if (n > MAX_THREADS) n = MAX_THREADS;
  __atomic_store_n(&finished, 0, __ATOMIC_SEQ_CST);
  started = 0;
  for (int t = 0; t < n; t++) {
    callers[t] = (caller){(notify_fn)(t % 2 == 0 ? even : odd), t, calls};
    if (pthread_create(&threads[t], 0, run, &callers[t]) != 0) break;
    started++;
  }
  return started;
}

/* How many of the started threads have made all their calls. */
int callers_finished(void) {
  return __atomic_load_n(&finished, __ATOMIC_SEQ_CST);
}

void callers_join(void) {
  for (int t = 0; t < started; t++) pthread_join(threads[t], 0);
  started = 0;
}

/* One call on the caller's own thread. */
void call_now(void *fn, void *object, int32_t status, uintptr_t id) {
  ((notify_fn)fn)(object, status, id);
}

/* `n` calls on the caller's own thread inside this one, ids base .. base + n - 1 (object 0x1000 + id,
 * status -id - 1), as PoCL calls a failed user event's commands' callbacks inside clSetUserEventStatus. */
void call_many(void *fn, int32_t base, int32_t n) {
  for (int32_t i = 0; i < n; i++) {
    uintptr_t id = (uintptr_t)(base + i);
    ((notify_fn)fn)((void *)(0x1000 + id), -(int32_t)id - 1, id);
  }
}
