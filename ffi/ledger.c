/*
 * The memory ledger: accounts for Embree's memory monitor, one per `user_data` id, so that a
 * device with no JS monitor is counted and held to its budget here, on whatever thread allocates,
 * instead of parking a TBB worker for a round trip through the JS event loop per allocation. An
 * account that forwards hands its calls to `ledger_forward` (the JS monitor); JS settles them with
 * ledger_apply. One lock for everything: it is never held while JS runs, so no path can wait on
 * the JS thread with it.
 *
 * Included by two files, which define `ledger_forward` first:
 * - ffi/bun-relay.c, compiled by Bun's TinyCC at run time (the forward goes to a relay slot);
 * - ffi/prebuilt/memlife-ledger.c, built ahead of time into the library Deno and Node load (the
 *   forward goes to the backend's JS callback).
 * ffi/js-ledger.ts has the same rule for when that library is absent; test/ledger-cases.ts states
 * it as cases that every implementation is tested against (test/ledger.spec.ts).
 *
 * Every function here takes and returns integers, doubles and pointers only, so that TinyCC and
 * each runtime's FFI call it without struct layouts.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  int64_t bytes, peak, last_refused, last_refused_live;
  double calls, denied, budget_denied, native;
  double budget;
  int has_budget;
  int forward;
} account;

static pthread_mutex_t ledger_mu = PTHREAD_MUTEX_INITIALIZER;
static account *accounts;
static uint32_t account_count;
/* What ledger_forward is given: set once by ledger_init, on the JS thread. */
static void *ledger_relay;

/* a + b, stopped at int64_t's ends rather than wrapped. */
static int64_t add_within(int64_t a, int64_t b) {
  if (b > 0 && a > INT64_MAX - b) return INT64_MAX;
  if (b < 0 && a < INT64_MIN - b) return INT64_MIN;
  return a + b;
}

/*
 * The seed's rule, under ledger_mu: 0 allowed, 1 refused by the budget, 2 refused by `answer`, or
 * because it would take the live bytes to 2^63 - 1 or past (no allocation is that large, but the
 * count is the library's word: a sum past int64_t wrapped negative and got past the budget).
 */
static int settle(account *a, int64_t bytes, int post, int answer) {
  int verdict = 0;
  a->calls++;
  int beyond = bytes > 0 && a->bytes >= INT64_MAX - bytes;
  if (beyond) {
    verdict = 2;
  } else if (bytes > 0 && a->has_budget && (double)a->bytes + (double)bytes > a->budget) {
    verdict = 1;
    a->budget_denied++;
    a->last_refused = bytes;
    a->last_refused_live = a->bytes;
  } else if (!answer) {
    verdict = 2;
  }
  /* A refused call before the allocation is not counted: it never happens. */
  if (!beyond && (verdict == 0 || post || bytes <= 0)) {
    a->bytes = add_within(a->bytes, bytes);
    if (a->bytes > a->peak) a->peak = a->bytes;
  }
  if (verdict != 0 && bytes > 0) a->denied++;
  return verdict;
}

/*
 * bool (*RTCMemoryMonitorFunction)(void *userPtr, ssize_t bytes, bool post), called through its
 * integer-register form: under the x86-64 and AArch64 SysV ABIs the three arguments arrive in the
 * same registers, and a `bool` may carry garbage above its low 8 bits.
 */
static uint64_t ledger_monitor(uint64_t id, uint64_t bytes, uint64_t post) {
  pthread_mutex_lock(&ledger_mu);
  /* An id never reset is no device's: allow, as the JS side does for an unknown id. */
  if (id == 0 || id >= account_count) {
    pthread_mutex_unlock(&ledger_mu);
    return 1;
  }
  account *a = &accounts[id];
  if (a->forward) {
    pthread_mutex_unlock(&ledger_mu);
    return ledger_forward(ledger_relay, id, bytes, post & 0xff);
  }
  a->native++;
  int verdict = settle(a, (int64_t)bytes, (post & 0xff) != 0, 1);
  pthread_mutex_unlock(&ledger_mu);
  return verdict == 0;
}

/* Once, on the JS thread: `relay` is what forwarded calls go to. Returns the monitor to give Embree. */
void *ledger_init(void *relay) {
  ledger_relay = relay;
  return (void *)ledger_monitor;
}

/* Returns 0, or 12 (ENOMEM) when the table cannot grow. */
int ledger_reset(uint32_t id) {
  pthread_mutex_lock(&ledger_mu);
  if (id >= account_count) {
    uint32_t n = account_count ? account_count : 16;
    while (n <= id) n *= 2;
    account *grown = realloc(accounts, n * sizeof(account));
    if (!grown) {
      pthread_mutex_unlock(&ledger_mu);
      return 12;
    }
    for (uint32_t i = account_count; i < n; i++) memset(&grown[i], 0, sizeof(account));
    accounts = grown;
    account_count = n;
  }
  memset(&accounts[id], 0, sizeof(account));
  pthread_mutex_unlock(&ledger_mu);
  return 0;
}

void ledger_set_forward(uint32_t id, int forward) {
  pthread_mutex_lock(&ledger_mu);
  if (id < account_count) accounts[id].forward = forward;
  pthread_mutex_unlock(&ledger_mu);
}

void ledger_set_budget(uint32_t id, int has_budget, double budget) {
  pthread_mutex_lock(&ledger_mu);
  if (id < account_count) {
    accounts[id].has_budget = has_budget;
    accounts[id].budget = budget;
  }
  pthread_mutex_unlock(&ledger_mu);
}

/* A forwarded call, with JS's answer. */
int ledger_apply(uint32_t id, double bytes, int post, int answer) {
  /* A double at or past 2^63 has no int64_t (the conversion would be undefined): the nearest end. */
  int64_t whole = bytes >= 9223372036854775807.0 ? INT64_MAX : bytes <= -9223372036854775807.0 ? INT64_MIN : (int64_t)bytes;
  pthread_mutex_lock(&ledger_mu);
  int verdict = id < account_count ? settle(&accounts[id], whole, post, answer) : (answer ? 0 : 2);
  pthread_mutex_unlock(&ledger_mu);
  return verdict;
}

/* out: bytes, peak, calls, denied, budget refusals, native calls, last refused bytes, live bytes then. */
void ledger_read(uint32_t id, double *out) {
  pthread_mutex_lock(&ledger_mu);
  account zero;
  memset(&zero, 0, sizeof zero);
  account *a = id < account_count ? &accounts[id] : &zero;
  out[0] = (double)a->bytes;
  out[1] = (double)a->peak;
  out[2] = a->calls;
  out[3] = a->denied;
  out[4] = a->budget_denied;
  out[5] = a->native;
  out[6] = (double)a->last_refused;
  out[7] = (double)a->last_refused_live;
  pthread_mutex_unlock(&ledger_mu);
}
