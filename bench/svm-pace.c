/*
 * What the caller's pace does to a queued SVM free, in C: clSVMAlloc + clEnqueueSVMFree +
 * clReleaseEvent, clFinish every 256 (the bench's "svm 4 KiB enqueueSVMFree"), with a busy wait
 * of D ns added to each iteration. If an iteration grew by D, a wrapper's JS time would cost the
 * SVM free row what it costs; on a machine where the driver's worker threads go idle between
 * commands when the caller is slower, and each enqueue then has to wake one, it grows by more.
 *
 *   cc -O2 -o /tmp/svm-pace bench/svm-pace.c -ldl && /tmp/svm-pace [rounds]
 *
 * Prints, per D, the median ns per iteration over the rounds (taken round-robin), what it added
 * over D = 0 against D itself, and the context switches per iteration of the whole process
 * (getrusage: the driver's threads included).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

typedef void *h;
static int32_t (*clGetPlatformIDs)(uint32_t, h *, uint32_t *);
static int32_t (*clGetDeviceIDs)(h, uint64_t, uint32_t, h *, uint32_t *);
static h (*clCreateContext)(const intptr_t *, uint32_t, const h *, void *, void *, int32_t *);
static h (*clCreateCommandQueue)(h, h, uint64_t, int32_t *);
static void *(*clSVMAlloc)(h, uint64_t, size_t, uint32_t);
static int32_t (*clEnqueueSVMFree)(h, uint32_t, void **, void *, void *, uint32_t, const h *, h *);
static int32_t (*clReleaseEvent)(h);
static int32_t (*clFinish)(h);

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static void spin(double ns) {
  if (ns <= 0) return;
  double until = now_ns() + ns;
  while (now_ns() < until) {
  }
}

static h context, queue;

static double run(long n, double delay) {
  double t0 = now_ns();
  for (long i = 0; i < n; i++) {
    spin(delay);
    void *p = clSVMAlloc(context, 1 /* CL_MEM_READ_WRITE */, 4096, 0);
    h event;
    if (!p || clEnqueueSVMFree(queue, 1, &p, NULL, NULL, 0, NULL, &event) != 0) {
      fprintf(stderr, "svm-pace: clSVMAlloc or clEnqueueSVMFree failed\n");
      exit(1);
    }
    clReleaseEvent(event);
    if ((i + 1) % 256 == 0) clFinish(queue);
  }
  clFinish(queue);
  return (now_ns() - t0) / n;
}

static long switches(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_nvcsw + u.ru_nivcsw;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 9;
  void *lib = dlopen("libOpenCL.so.1", RTLD_NOW);
  if (!lib) {
    fprintf(stderr, "svm-pace: %s\n", dlerror());
    return 1;
  }
#define LOAD(name) *(void **)&name = dlsym(lib, #name)
  LOAD(clGetPlatformIDs), LOAD(clGetDeviceIDs), LOAD(clCreateContext), LOAD(clCreateCommandQueue);
  LOAD(clSVMAlloc), LOAD(clEnqueueSVMFree), LOAD(clReleaseEvent), LOAD(clFinish);
  h platform, device;
  int32_t err;
  if (clGetPlatformIDs(1, &platform, NULL) != 0 || clGetDeviceIDs(platform, 0xFFFFFFFF, 1, &device, NULL) != 0) {
    fprintf(stderr, "svm-pace: no OpenCL device\n");
    return 1;
  }
  context = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
  queue = clCreateCommandQueue(context, device, 0, &err);
  static const double delays[] = { 0, 25, 50, 100, 200, 400, 800 };
  enum { N_DELAYS = sizeof delays / sizeof delays[0], N = 20000 };
  double times[N_DELAYS][64];
  double csw[N_DELAYS] = { 0 };
  if (rounds > 64) rounds = 64;
  for (int d = 0; d < N_DELAYS; d++) run(N / 4, delays[d]); /* warm-up */
  for (int r = 0; r < rounds; r++) {
    for (int d = 0; d < N_DELAYS; d++) {
      long s0 = switches();
      times[d][r] = run(N, delays[d]);
      csw[d] += (double)(switches() - s0) / N;
    }
  }
  /* What a wait really costs alone: reading the clock is part of it (tens of ns on a VM). */
  double cost[N_DELAYS];
  for (int d = 0; d < N_DELAYS; d++) {
    double t0 = now_ns();
    for (int i = 0; i < 200000; i++) spin(delays[d]);
    cost[d] = (now_ns() - t0) / 200000;
  }
  double base = 0;
  printf("caller work added per SVM free (its cost alone)  ->  ns per iteration (median of %d), added over none,"
         " context switches per iteration (all threads)\n",
         rounds);
  for (int d = 0; d < N_DELAYS; d++) {
    qsort(times[d], rounds, sizeof(double), cmp);
    double median = times[d][rounds / 2];
    if (d == 0) base = median;
    printf("  %4.0f ns (%4.0f)  ->  %5.0f ns  %+5.0f ns (%.1fx the work)  %.2f\n", delays[d], cost[d], median,
           median - base, cost[d] > 1 ? (median - base) / cost[d] : 0.0, csw[d] / rounds);
  }
  return 0;
}
