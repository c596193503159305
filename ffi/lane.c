/*
 * Lanes: the threads memlife runs native calls on, off the JS thread. A call goes to the lane that
 * became idle last (a stack, not a queue), so calls made one after another run on the same thread,
 * and a new lane starts only when every lane is busy: a call may wait for another one (a read
 * waiting for an event that a later call completes), and a fixed number of threads would deadlock.
 *
 * Why the same thread: Embree's commits of a small scene took up to a third longer on average when
 * four threads took turns making them, the way the pools of Node and Deno, and a condition variable
 * shared by many threads, hand out calls (10k triangles: mean 1.3 -> 1.7-1.8 ms, a fifth or more of
 * the commits near 2.3 ms; one to three threads measured alike: bench/lane-threads.c). Through
 * memlife: Node 1.9 -> 1.35 ms, Deno 1.5-2.0 -> 1.3, Bun 1.6-1.7 -> 1.4-1.5 (its pool had grown to
 * 13 threads, one more each time a call ended after its thread had reported it).
 *
 * Included by two files:
 * - ffi/bun-relay.c, compiled by Bun's TinyCC at run time: every async call of Bun's backend;
 * - ffi/prebuilt/memlife-ledger.c, built ahead of time for Deno and Node: `lane_submit`, for the
 *   calls a symbol table marks `sameThread` (it returns at once; the lane calls back with the
 *   result), and `lane_run`, which a runtime's async call waits in where that cannot start.
 * TinyCC has no <stdatomic.h>: everything shared is guarded by lane_mu.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

typedef uint64_t (*lane_fn)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
                            uint64_t, uint64_t);

typedef struct lane_job {
  lane_fn fn;
  uint64_t a[9];
  /* Called on the lane after fn returned, with its result; owns the job from then on. The lane is
   * idle again by then, so the next call the caller makes as soon as it learns can take it. */
  void (*finish)(struct lane_job *, uint64_t);
} lane_job;

typedef struct lane {
  pthread_cond_t cv;
  lane_job *job; /* given, not yet taken */
  struct lane *below; /* the next idle lane, while on the idle stack */
} lane;

static pthread_mutex_t lane_mu = PTHREAD_MUTEX_INITIALIZER;
static lane *idle_top; /* idle lanes, the one idle last on top */
static int lanes_idle;
static int lanes; /* alive */

/* Lanes beyond `lanes_kept` idle ones leave after `lane_idle_seconds` without work. A Bun Worker
 * keeps none (bun-relay.c, memlife_init): nothing tells it that it is being terminated, and a
 * terminated Worker's lanes, never given work again, stayed for the life of the process, one
 * thread or more per Worker. */
#define LANES_KEPT 4
#define LANE_IDLE_SECONDS 10
static int lanes_kept = LANES_KEPT;
static int lane_idle_seconds = LANE_IDLE_SECONDS;
#define LANE_STACK ((size_t)8 << 20)

/* Under lane_mu. */
static void lane_unstack(lane *l) {
  lane **p = &idle_top;
  while (*p && *p != l) p = &(*p)->below;
  if (*p) *p = l->below;
}

#ifdef __linux__
/* glibc's, declared here: TinyCC compiles this file without _GNU_SOURCE. */
extern int pthread_setname_np(pthread_t thread, const char *name);
#endif

static void *lane_main(void *arg) {
  lane *l = arg;
#ifdef __linux__
  /* Named, so that a program (and test/fixtures/worker-lanes.ts) can tell memlife's threads apart. */
  pthread_setname_np(pthread_self(), "memlife-lane");
#endif
  pthread_mutex_lock(&lane_mu);
  for (;;) {
    while (!l->job) {
      struct timespec until;
      clock_gettime(CLOCK_REALTIME, &until);
      until.tv_sec += lane_idle_seconds;
      if (pthread_cond_timedwait(&l->cv, &lane_mu, &until) != 0 && !l->job && lanes_idle > lanes_kept) {
        lane_unstack(l);
        lanes_idle--;
        lanes--;
        pthread_mutex_unlock(&lane_mu);
        pthread_cond_destroy(&l->cv);
        free(l);
        return 0;
      }
    }
    lane_job *j = l->job;
    l->job = 0;
    pthread_mutex_unlock(&lane_mu);

    uint64_t r = j->fn(j->a[0], j->a[1], j->a[2], j->a[3], j->a[4], j->a[5], j->a[6], j->a[7], j->a[8]);

    pthread_mutex_lock(&lane_mu);
    l->below = idle_top;
    idle_top = l;
    lanes_idle++;
    pthread_mutex_unlock(&lane_mu);
    j->finish(j, r);
    pthread_mutex_lock(&lane_mu);
  }
}

/* Hands `j` to the lane idle last, or to a new one. Returns 0, or the pthread_create error (or
 * ENOMEM, 12): then nothing runs `j`. */
static int lane_start(lane_job *j) {
  pthread_mutex_lock(&lane_mu);
  lane *l = idle_top;
  if (l) {
    idle_top = l->below;
    lanes_idle--;
    l->job = j;
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&lane_mu);
    return 0;
  }
  l = malloc(sizeof(lane));
  if (!l) {
    pthread_mutex_unlock(&lane_mu);
    return 12;
  }
  pthread_cond_init(&l->cv, 0);
  l->job = j;
  l->below = 0;
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  /* The thread that commits joins TBB's arena and builds too: at least the 8 MiB a main thread
   * usually gets (ffi/node.ts gives koffi's async calls as much), whatever `ulimit -s` says. */
  size_t stack = 0;
  if (pthread_attr_getstacksize(&attr, &stack) == 0 && stack < LANE_STACK) pthread_attr_setstacksize(&attr, LANE_STACK);
  int err = pthread_create(&t, &attr, lane_main, l);
  pthread_attr_destroy(&attr);
  if (err) {
    pthread_cond_destroy(&l->cv);
    free(l);
  } else {
    lanes++;
  }
  pthread_mutex_unlock(&lane_mu);
  return err;
}

/* Lanes alive. */
int lane_count(void) {
  pthread_mutex_lock(&lane_mu);
  int n = lanes;
  pthread_mutex_unlock(&lane_mu);
  return n;
}
