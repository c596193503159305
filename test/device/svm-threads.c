// Is NVIDIA's SVM allocator safe when threads of one process use it at once? In C alone, without
// memlife or a JS runtime: THREADS threads, each making its own context and queue per round, and
// per round 20 times: clSVMAlloc(4096), clEnqueueSVMFree, wait for the free. Between them each
// thread churns malloc with guarded blocks, and checks the guards, to see stray writes.
//
//   cc -O2 -pthread -o svm-threads test/device/svm-threads.c -lOpenCL
//   ./svm-threads MODE LOCK [THREADS] [ROUNDS]       (PLATFORM env: a platform name's part, default NVIDIA)
//
// MODE: 0 clEnqueueSVMFree with no callback (the driver frees);
//       1 a callback that calls clSVMFree itself, on the driver's thread;
//       2 a callback that hands the pointers to the thread that enqueued and waits until that
//         thread has called clSVMFree (what Deno's thread-safe callback does: the JS thread runs it).
// LOCK: 1 takes one process-wide mutex around each clSVMAlloc and clSVMFree.
// Prints the NULLs from clSVMAlloc and any guard found overwritten; exits 0 when it ends.
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int mode, lock_all, rounds = 5;
static cl_platform_id platform;
static cl_device_id device;
static pthread_mutex_t big = PTHREAD_MUTEX_INITIALIZER;
static long nulls, stray;

struct handoff {
  pthread_mutex_t m;
  pthread_cond_t c;
  void **pointers;
  cl_uint n;
  int done;
  cl_context ctx;
  pthread_t owner;
};

static void *svm_alloc(cl_context ctx) {
  if (lock_all) pthread_mutex_lock(&big);
  void *p = clSVMAlloc(ctx, CL_MEM_READ_WRITE, 4096, 0);
  if (lock_all) pthread_mutex_unlock(&big);
  return p;
}
static void svm_free(cl_context ctx, void *p) {
  if (lock_all) pthread_mutex_lock(&big);
  clSVMFree(ctx, p);
  if (lock_all) pthread_mutex_unlock(&big);
}

static void CL_CALLBACK free_here(cl_command_queue q, cl_uint n, void **pointers, void *user) {
  (void)q;
  struct handoff *h = user;
  for (cl_uint i = 0; i < n; i++) svm_free(h->ctx, pointers[i]);
  pthread_mutex_lock(&h->m);
  h->done = 1;
  pthread_cond_signal(&h->c);
  pthread_mutex_unlock(&h->m);
}
static void CL_CALLBACK free_there(cl_command_queue q, cl_uint n, void **pointers, void *user) {
  (void)q;
  struct handoff *h = user;
  if (pthread_equal(pthread_self(), h->owner)) {  // called inside the enqueue: nobody to hand to
    free_here(q, n, pointers, user);
    return;
  }
  pthread_mutex_lock(&h->m);
  h->pointers = pointers;
  h->n = n;
  pthread_cond_signal(&h->c);
  while (h->done != 2) pthread_cond_wait(&h->c, &h->m);  // the owner frees, then says so
  pthread_mutex_unlock(&h->m);
}

#define RING 64
static void churn(unsigned char **ring, size_t *sizes, unsigned *seed) {
  for (int k = 0; k < 16; k++) {
    int slot = rand_r(seed) % RING;
    if (ring[slot]) {
      for (size_t b = 0; b < sizes[slot]; b++)
        if (ring[slot][b] != (unsigned char)(slot + 1)) {
          __atomic_fetch_add(&stray, 1, __ATOMIC_RELAXED);
          fprintf(stderr, "stray write: block %p (%zu bytes) byte %zu is %u\n", (void *)ring[slot], sizes[slot], b, ring[slot][b]);
          break;
        }
      free(ring[slot]);
    }
    sizes[slot] = 16 + rand_r(seed) % 8192;
    ring[slot] = malloc(sizes[slot]);
    memset(ring[slot], slot + 1, sizes[slot]);
  }
}

static void *worker(void *arg) {
  unsigned seed = (unsigned)(size_t)arg;
  unsigned char *ring[RING] = {0};
  size_t sizes[RING] = {0};
  for (int r = 0; r < rounds; r++) {
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    if (!ctx) { fprintf(stderr, "clCreateContext %d\n", err); exit(2); }
    cl_command_queue q = clCreateCommandQueueWithProperties(ctx, device, NULL, &err);
    if (!q) { fprintf(stderr, "clCreateCommandQueue %d\n", err); exit(2); }
    for (int i = 0; i < 20; i++) {
      void *p = svm_alloc(ctx);
      if (!p) { __atomic_fetch_add(&nulls, 1, __ATOMIC_RELAXED); continue; }
      struct handoff h = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, 0, 0, ctx, pthread_self()};
      cl_event ev;
      err = clEnqueueSVMFree(q, 1, &p, mode == 0 ? NULL : mode == 1 ? free_here : free_there, &h, 0, NULL, &ev);
      if (err) { fprintf(stderr, "clEnqueueSVMFree %d\n", err); exit(2); }
      clFlush(q);
      if (mode == 2) {
        pthread_mutex_lock(&h.m);
        while (!h.pointers && !h.done) pthread_cond_wait(&h.c, &h.m);
        for (cl_uint k = 0; h.pointers && k < h.n; k++) svm_free(ctx, h.pointers[k]);
        h.done = 2;
        pthread_cond_broadcast(&h.c);
        pthread_mutex_unlock(&h.m);
      }
      clWaitForEvents(1, &ev);
      if (mode == 1) {
        pthread_mutex_lock(&h.m);
        while (!h.done) pthread_cond_wait(&h.c, &h.m);
        pthread_mutex_unlock(&h.m);
      }
      clReleaseEvent(ev);
      churn(ring, sizes, &seed);
    }
    clFinish(q);
    clReleaseCommandQueue(q);
    clReleaseContext(ctx);
  }
  for (int s = 0; s < RING; s++) free(ring[s]);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 3) { fprintf(stderr, "usage: svm-threads MODE LOCK [THREADS] [ROUNDS]\n"); return 2; }
  mode = atoi(argv[1]);
  lock_all = atoi(argv[2]);
  int threads = argc > 3 ? atoi(argv[3]) : 4;
  if (argc > 4) rounds = atoi(argv[4]);
  const char *want = getenv("PLATFORM") ? getenv("PLATFORM") : "NVIDIA";
  cl_platform_id ps[8];
  cl_uint np = 0;
  cl_int err = clGetPlatformIDs(8, ps, &np);
  for (cl_uint i = 0; i < np && !platform; i++) {
    char name[256] = "";
    clGetPlatformInfo(ps[i], CL_PLATFORM_NAME, sizeof name, name, NULL);
    if (strstr(name, want)) platform = ps[i];
  }
  if (!platform || (err = clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL))) {
    fprintf(stderr, "no %s device (%u platforms, error %d)\n", want, np, err);
    return 2;
  }
  pthread_t t[64];
  for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, worker, (void *)(size_t)(i + 1));
  for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
  printf("mode %d lock %d threads %d rounds %d: %ld NULLs of %d allocations, %ld stray writes\n", mode, lock_all,
         threads, rounds, nulls, threads * rounds * 20, stray);
  return 0;
}
