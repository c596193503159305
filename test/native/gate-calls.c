/*
 * Native calls that block until the test opens a gate, counting how many are inside at once: for
 * test/fixtures/async-cap.ts, which checks how many asynchronous calls memlife's backend lets run
 * at once (README: 64 on Node, 256 on Bun, no cap of memlife's on Deno).
 *
 * Build: cc -O2 -fPIC -shared -pthread -o libgate-calls.so gate-calls.c
 */
#include <pthread.h>
#include <stdint.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int32_t inside, most, opened;

/* Blocks until gate_open(); returns how many calls were inside when this one entered. */
uint64_t gate_enter(void) {
  pthread_mutex_lock(&mu);
  int32_t seen = ++inside;
  if (inside > most) most = inside;
  while (!opened) pthread_cond_wait(&cv, &mu);
  inside--;
  pthread_mutex_unlock(&mu);
  return (uint64_t)seen;
}

void gate_open(void) {
  pthread_mutex_lock(&mu);
  opened = 1;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
}

int32_t gate_inside(void) {
  pthread_mutex_lock(&mu);
  int32_t n = inside;
  pthread_mutex_unlock(&mu);
  return n;
}

int32_t gate_most(void) {
  pthread_mutex_lock(&mu);
  int32_t n = most;
  pthread_mutex_unlock(&mu);
  return n;
}
