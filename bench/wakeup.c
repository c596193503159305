/*
 * What waking an idle thread costs on this machine: the floor under every callback that a native
 * thread hands to the JS thread and waits for (a destructor on NVIDIA's driver thread, an Embree
 * monitor call on a TBB thread). Two threads take turns 2000 times, each turn after 200 us idle:
 *   condvar both ways          both sides block on a pthread condition variable
 *   eventfd+epoll, condvar     one side sleeps in epoll_wait on an eventfd, as an event loop does
 *                              (libuv, tokio), and answers through a condition variable
 *   spin, then condvar         the waiting side spins up to SPIN_US before blocking
 *   condvar, one CPU           condvar both ways, both threads pinned to CPU 0
 *   condvar, two CPUs          condvar both ways, pinned to CPUs 0 and 1
 * Median and 10th/90th percentile of the round trip. In a VM, waking a thread on another vCPU
 * that went idle costs the hypervisor's wake-up of that vCPU; on the same CPU it is a context
 * switch: the last two lines show which a machine pays.
 *
 *   cc -O2 -pthread bench/wakeup.c -o /tmp/wakeup && /tmp/wakeup [SPIN_US=100]
 *
 * Measured 2026-11-25 (README, "Where targets are missed"): on this repository's 2-core VM 8.1, 5.1,
 * 46 (spinning 20 us: the woken thread is queued behind the spinner), 7.9 on one CPU and 47 us on
 * two; a koffi callback from another thread measured 7.7-9 us with the process on one CPU and
 * 9 or 39-47 us (run by run) on two. The H100 machine (16 cores): see
 * test/device/results/wakeup-monitor-nvidia-2026-11-25.txt.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

enum { TURNS = 2000, IDLE_US = 200 };

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static atomic_int turn; /* 0: the main thread's, 1: the other's */
static int mode, spin_us, request_fd, epoll_fd;
enum { CONDVAR, EPOLL, SPIN, ONE_CPU, TWO_CPUS, MODES };

static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void unpin(void) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int i = 0; i < CPU_SETSIZE; i++) CPU_SET(i, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void give(int to) {
  pthread_mutex_lock(&mu);
  atomic_store(&turn, to);
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
}

static void await_turn(int mine, int spin) {
  if (spin > 0) {
    double end = now_us() + spin;
    while (now_us() < end) {
      if (atomic_load(&turn) == mine) return;
    }
  }
  pthread_mutex_lock(&mu);
  while (atomic_load(&turn) != mine) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
}

static void *other(void *unused) {
  (void)unused;
  if (mode == ONE_CPU) pin(0);
  if (mode == TWO_CPUS) pin(1);
  for (int i = 0; i < TURNS; i++) {
    if (mode == EPOLL) {
      struct epoll_event ev;
      uint64_t value;
      while (epoll_wait(epoll_fd, &ev, 1, -1) != 1) {}
      if (read(request_fd, &value, sizeof value) != sizeof value) abort();
    } else {
      await_turn(1, mode == SPIN ? spin_us : 0);
    }
    give(0);
  }
  return NULL;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  spin_us = argc > 1 ? atoi(argv[1]) : 100;
  char spinning[64];
  snprintf(spinning, sizeof spinning, "spin %d us, then condvar", spin_us);
  const char *names[] = {"condvar both ways", "eventfd+epoll, condvar back", spinning, "condvar, one CPU",
                         "condvar, two CPUs"};
  static double took[TURNS];
  int cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
  for (mode = 0; mode < MODES; mode++) {
    if (mode == TWO_CPUS && cpus < 2) break;
    if (mode == ONE_CPU || mode == TWO_CPUS) pin(0);
    else unpin();
    atomic_store(&turn, 0);
    request_fd = eventfd(0, 0);
    epoll_fd = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = request_fd};
    epoll_ctl(epoll_fd, EPOLL_CTL_ADD, request_fd, &ev);
    pthread_t thread;
    pthread_create(&thread, NULL, other, NULL);
    for (int i = 0; i < TURNS; i++) {
      usleep(IDLE_US);
      double t0 = now_us();
      if (mode == EPOLL) {
        uint64_t one = 1;
        atomic_store(&turn, 1);
        if (write(request_fd, &one, sizeof one) != sizeof one) abort();
      } else {
        give(1);
      }
      await_turn(0, mode == SPIN ? spin_us : 0);
      took[i] = now_us() - t0;
    }
    pthread_join(thread, NULL);
    qsort(took, TURNS, sizeof took[0], by_value);
    printf("%-30s median %7.1f us   p10 %7.1f   p90 %7.1f\n", names[mode], took[TURNS / 2], took[TURNS / 10],
           took[TURNS * 9 / 10]);
    close(request_fd);
    close(epoll_fd);
  }
  return 0;
}
