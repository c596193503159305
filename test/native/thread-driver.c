/*
 * An OpenCL "driver" that calls every destructor callback from a thread of its own, as NVIDIA's
 * does: loaded as OPENCL_LIBRARY, it defines clSetMemObjectDestructorCallback and leaves every
 * other symbol to the real ICD loader it links (as sync-driver.c). PoCL calls a destructor inside
 * clReleaseMemObject, on the caller's thread; here that call only queues it, and the driver thread
 * makes it, in order. So the path a GPU takes (a callback from a foreign thread, after the release
 * returned) runs on this machine's CPU device too, without the GPU driver's own cost per buffer.
 * MEMLIFE_DRIVER_DELAY_US=<n>: each call is made no sooner than n us after its release, as a
 * driver's that still has work to do: then the program's own code after the release has run.
 *
 * Build: cc -O2 -fPIC -shared -pthread -o libthread-driver.so thread-driver.c -Wl,--no-as-needed -lOpenCL -ldl
 */
#define CL_TARGET_OPENCL_VERSION 300
#define _GNU_SOURCE
#include <CL/cl.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

typedef void(CL_CALLBACK *destructor_fn)(cl_mem, void *);
typedef cl_int (*set_destructor_fn)(cl_mem, destructor_fn, void *);

typedef struct call {
  destructor_fn fn;
  void *user_data;
  cl_mem mem;
  struct timespec due;
  struct call *next;
} call;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static call *first, *last;
static int started;
/* Callbacks made from the driver thread: the bench and tests check that this library was used. */
static unsigned long delivered;
unsigned long thread_driver_calls(void) { return __atomic_load_n(&delivered, __ATOMIC_SEQ_CST); }

static void *deliver(void *unused) {
  (void)unused;
  pthread_mutex_lock(&mu);
  for (;;) {
    while (first == NULL) pthread_cond_wait(&cv, &mu);
    call *c = first;
    first = c->next;
    if (first == NULL) last = NULL;
    pthread_mutex_unlock(&mu);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &c->due, NULL) == EINTR) continue;
    c->fn(c->mem, c->user_data);
    __atomic_add_fetch(&delivered, 1, __ATOMIC_SEQ_CST);
    free(c);
    pthread_mutex_lock(&mu);
  }
  return NULL;
}

/* What PoCL calls, inside clReleaseMemObject: hand the program's callback to the driver thread. */
static void CL_CALLBACK queue_call(cl_mem mem, void *record) {
  call *c = record;
  c->mem = mem;
  c->next = NULL;
  const char *delay = getenv("MEMLIFE_DRIVER_DELAY_US");
  clock_gettime(CLOCK_MONOTONIC, &c->due);
  if (delay != NULL) {
    long ns = c->due.tv_nsec + atol(delay) * 1000L;
    c->due.tv_sec += ns / 1000000000L;
    c->due.tv_nsec = ns % 1000000000L;
  }
  pthread_mutex_lock(&mu);
  if (last != NULL) last->next = c;
  else first = c;
  last = c;
  pthread_cond_signal(&cv);
  pthread_mutex_unlock(&mu);
}

CL_API_ENTRY cl_int CL_API_CALL clSetMemObjectDestructorCallback(cl_mem mem, destructor_fn notify, void *user_data) {
  set_destructor_fn real = (set_destructor_fn)dlsym(RTLD_NEXT, __func__);
  if (real == NULL) return CL_INVALID_OPERATION;
  if (notify == NULL) return real(mem, notify, user_data); /* the driver's own error */
  pthread_mutex_lock(&mu);
  if (!started) {
    pthread_t thread;
    if (pthread_create(&thread, NULL, deliver, NULL) != 0) {
      pthread_mutex_unlock(&mu);
      return CL_OUT_OF_HOST_MEMORY;
    }
    pthread_detach(thread);
    started = 1;
  }
  pthread_mutex_unlock(&mu);
  call *c = malloc(sizeof *c);
  if (c == NULL) return CL_OUT_OF_HOST_MEMORY;
  c->fn = notify;
  c->user_data = user_data;
  cl_int status = real(mem, queue_call, c);
  if (status != CL_SUCCESS) free(c);
  return status;
}
