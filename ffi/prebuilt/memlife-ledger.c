/*
 * libmemlife-ledger: ffi/ledger.c, ffi/event-relay.c and ffi/lane.c as a library for Deno and Node,
 * which cannot compile C at run time as Bun does, and two pointer conversions for Deno. Built ahead of
 * time by ffi/prebuilt/build.sh into ffi/prebuilt/<os>-<arch>/ and shipped in the npm package;
 * where it is absent or cannot load, the backends fall back to the JS ledger (ffi/js-ledger.ts),
 * which asks JS for every call, and Deno to its own conversions. Nothing here is built on install.
 */
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* A forwarding account's call goes to the backend's JS callback, which has the monitor's own
 * signature (`user_data` declared usize: the account id). */
typedef bool (*monitor_fn)(uintptr_t id, ssize_t bytes, bool post);

static uint64_t ledger_forward(void *relay, uint64_t id, uint64_t bytes, uint64_t post);

#include "../ledger.c"
#include "../event-relay.c"
#include "../lane.c"

/* A value one thread waits for and another hands over, under the mutex the caller names: a
 * monitor call's answer (a ticket, ledger_forward), a lane call's result (lane_run). */
typedef struct {
  int done;
  uint64_t value;
  pthread_cond_t cv;
} handoff;

static void handoff_init(handoff *h) {
  h->done = 0;
  h->value = 0;
  pthread_cond_init(&h->cv, 0);
}

/* Signalled under the mutex: the waiter cannot destroy the condition before this returns. */
static void handoff_give(handoff *h, pthread_mutex_t *mu, uint64_t value) {
  pthread_mutex_lock(mu);
  h->value = value;
  __atomic_store_n(&h->done, 1, __ATOMIC_RELEASE);
  pthread_cond_signal(&h->cv);
  pthread_mutex_unlock(mu);
}

static uint64_t handoff_take(handoff *h, pthread_mutex_t *mu) {
  pthread_mutex_lock(mu);
  while (!h->done) pthread_cond_wait(&h->cv, mu);
  uint64_t value = h->value;
  pthread_mutex_unlock(mu);
  pthread_cond_destroy(&h->cv);
  return value;
}

/*
 * Where the backend asks for it (Deno), a forwarded call from another thread waits on a ticket of
 * its own instead of inside the runtime's thread-safe callback: `ledger_waited`, a burst slot of
 * the event relay, queues the call and returns at once, the relay thread asks JS to take it, and
 * JS answers with ledger_answer as soon as the monitor returned. Deno's own callback wakes its
 * caller only after the JS thread finished the whole task, through a zero-capacity channel
 * (deno_core's spawn_blocking), and its JS thread was seen in sched_yield there; meanwhile the
 * waiting TBB worker holds one of Embree's allocator spin locks, on which the other workers spin
 * (perf: most of a monitored build's CPU). bench/monitor-threads.ts, 10k triangles, a call's
 * cost: on this repository's 2-vCPU VM 413-617 us in Deno's callback, 79-200 us through a ticket
 * (the commit 5.7-7.6x the unmonitored one, 2.0-3.6x); on the 16-core H100 host 16-25 us in the
 * callback and 40-54 us through a ticket (1.11-1.18x, 1.23-1.37x) until the spins below, confined
 * to 2, 4 or 8 of its CPUs alike: the wake-ups of the relay thread and of the waiting one. The
 * ticket is kept for what it saves where a call is dear. A choice per call by measured round
 * trips was tried: on the VM both ways' round trips spread over 30 us-1.6 ms, and commits went
 * 2-19 ms. Node's koffi callback took 25-28 us a call on the VM, 48-103 us through the relay
 * thread: Node keeps its callback.
 */
typedef void (*waited_fn)(uint64_t, uint64_t, uint64_t, uint64_t);
static waited_fn ledger_waited;

static pthread_mutex_t ticket_mu = PTHREAD_MUTEX_INITIALIZER;

/*
 * With LEDGER_SPARE_CPUS or more, the relay thread stays awake this long after a ticketed call is
 * queued, for the next one of the build, and the waiting thread spins this long for its answer
 * before it sleeps: two threads spinning where cores are to spare, which saves two wake-ups a call.
 * On the H100 host, 10k triangles, a call in Deno's callback against through a ticket: 16 CPUs
 * 21-29 us against 17-26 with both spins, 40-54 without; 8 CPUs 18-36 against 32-34, 45-46 with
 * the relay's spin alone; 4 CPUs 24-28 against 47-59 with both spins (too few cores to spin on).
 */
#define LEDGER_AWAKE_NS 200000
#define LEDGER_SPARE_CPUS 8
static int ledger_spare_cores;

/* Spins from `from` CPUs on (LEDGER_SPARE_CPUS by default; tests ask for fewer, so that a machine
 * with few CPUs runs the spinning path too). On the JS thread, while no ticketed call waits. */
void ledger_spin_from(int from) {
  cpu_set_t cpus;
  ledger_spare_cores = sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) >= from;
}

static uint64_t ledger_forward(void *relay, uint64_t id, uint64_t bytes, uint64_t post) {
  waited_fn waited = __atomic_load_n(&ledger_waited, __ATOMIC_ACQUIRE);
  if (waited && !pthread_equal(pthread_self(), event_js_thread)) {
    handoff ticket;
    handoff_init(&ticket);
    if (ledger_spare_cores) {
      __atomic_store_n(&event_awake_until, event_now_ns() + LEDGER_AWAKE_NS, __ATOMIC_RELAXED);
    }
    waited(id, bytes, post & 0xff, (uint64_t)(uintptr_t)&ticket);
    if (ledger_spare_cores) {
      int64_t until = event_now_ns() + LEDGER_AWAKE_NS;
      while (!__atomic_load_n(&ticket.done, __ATOMIC_ACQUIRE) && event_now_ns() < until) event_pause();
    }
    return handoff_take(&ticket, &ticket_mu);
  }
  return ((monitor_fn)relay)((uintptr_t)id, (ssize_t)bytes, post != 0) ? 1 : 0;
}

/* Once, on the JS thread, before any account forwards: the burst callback forwarded calls go to,
 * with (id, bytes, post, ticket); its JS answers each with ledger_answer(ticket, answer). */
void ledger_wait_init(void *waited) {
  ledger_spin_from(LEDGER_SPARE_CPUS);
  __atomic_store_n(&ledger_waited, (waited_fn)waited, __ATOMIC_RELEASE);
}

/* JS's answer to the forwarded call of `ticket`: wakes the thread that waits for it. */
void ledger_answer(uint64_t ticket, int answer) {
  handoff_give((handoff *)(uintptr_t)ticket, &ticket_mu, answer != 0);
}

#include <dlfcn.h>

/* The address of `name` in the library `path` the process has open already, or NULL. */
void *lane_symbol(const char *path, const char *name) {
  void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (!h) return 0;
  void *f = dlsym(h, name);
  dlclose(h); /* only the reference RTLD_NOLOAD added: the library stays as its opener keeps it */
  return f;
}

/* A job of fn(arg): one pointer argument or none (the rest are 0), reported to `finish`. */
static void lane_job_set(lane_job *j, void *fn, void *arg, void (*finish)(lane_job *, uint64_t)) {
  j->fn = (lane_fn)fn;
  j->a[0] = (uint64_t)(uintptr_t)arg;
  j->finish = finish;
}

typedef struct {
  lane_job job;
  handoff result;
} waited_job;

static void waited_finish(lane_job *j, uint64_t r) {
  handoff_give(&((waited_job *)j)->result, &lane_mu, r);
}

/*
 * Runs fn(arg) on a lane and returns its result when it returned: the backend calls this off the
 * JS thread, on a thread of the runtime's pool, for a `sameThread` symbol (ffi/types.ts), a
 * function of one pointer argument or none, whose integer or pointer result (if any) comes back
 * whole. Where no lane can start, fn runs here, on the caller's thread, as without lanes.
 */
uint64_t lane_run(void *fn, void *arg) {
  waited_job w;
  memset(&w, 0, sizeof w);
  lane_job_set(&w.job, fn, arg, waited_finish);
  handoff_init(&w.result);
  if (lane_start(&w.job) != 0) {
    uint64_t r = w.job.fn(w.job.a[0], 0, 0, 0, 0, 0, 0, 0, 0);
    pthread_cond_destroy(&w.result.cv);
    return r;
  }
  return handoff_take(&w.result, &lane_mu);
}

/* The callback a lane reports to (ffi/native-ledger.ts, laneAsync): (id, result, 0, 0). */
typedef void (*lane_done_fn)(uint64_t, uint64_t, uint64_t, uint64_t);

typedef struct {
  lane_job job;
  lane_done_fn done;
  uint64_t id;
} posted_job;

static void posted_finish(lane_job *j, uint64_t r) {
  posted_job *p = (posted_job *)j;
  lane_done_fn done = p->done;
  uint64_t id = p->id;
  free(p);
  done(id, r, 0, 0);
}

/*
 * Starts fn(arg) on a lane and returns at once, holding no thread of the caller's: when fn returned,
 * the lane, idle again, calls done(id, its result), a callback that hands it to JS. For the same
 * functions as lane_run. Returns 0, or the error that left fn unrun (ENOMEM, or
 * pthread_create's).
 */
int lane_submit(void *fn, void *arg, void *done, uint64_t id) {
  posted_job *p = malloc(sizeof(posted_job));
  if (!p) return 12;
  memset(p, 0, sizeof *p);
  lane_job_set(&p->job, fn, arg, posted_finish);
  p->done = (lane_done_fn)done;
  p->id = id;
  int err = lane_start(&p->job);
  if (err) free(p);
  return err;
}

/* Deno's own conversions between a pointer object and its address, Deno.UnsafePointer.create and
 * .value, are ops of 55-65 ns each (Deno 2.9); a fast FFI call that returns its argument as the
 * other type takes 9. ffi/deno.ts uses these where the library opens; they keep no state. */
void *memlife_pointer(uint64_t address) {
  return (void *)(uintptr_t)address;
}

uint64_t memlife_address(const void *pointer) {
  return (uint64_t)(uintptr_t)pointer;
}

/*
 * The library's state (the ledger's accounts and tickets, the event relay's wake-up and slots, the
 * lanes) is the process's, and one JS realm may own it: the first to claim it. Another realm of the
 * process that loads the same file (each isolate of `deno serve --parallel`, which took the relay
 * over in turn: its requests hung) takes memlife's JS fallbacks; the conversions keep no state.
 */
static atomic_int memlife_claimed;

int memlife_claim(void) {
  int unclaimed = 0;
  return atomic_compare_exchange_strong(&memlife_claimed, &unclaimed, 1) ? 1 : 0;
}

#ifndef LEDGER_SOURCE_HASH
#error "build with ffi/prebuilt/build.sh, which passes -DLEDGER_SOURCE_HASH"
#endif

/* The hash of the sources this library was built from: a test compares it with the sources in
 * the tree, so a stale library cannot ship. */
const char *ledger_source_hash(void) {
  return LEDGER_SOURCE_HASH;
}
