/*
 * Why ffi/lane.c exists: Embree commits of a small scene, handed one after another to a pool of
 * threads in turn (as Node's libuv pool, Deno's blocking pool and a condition variable shared by
 * many threads hand out work), against the same commits on one thread. No JS involved.
 *
 *   cc -O2 -o /tmp/lane-threads bench/lane-threads.c -lm -lpthread -ldl && /tmp/lane-threads
 *
 * Prints, per pool size (0: on the main thread itself), the median, 80th and 90th percentile and
 * mean of 350 commits of 10k triangles, in ms. On this repository's 2-core VM (Embree 3.13.5, TBB
 * 2021.8): 1 to 3 threads in turn measure alike (mean 1.2-1.5 ms), 4 in turn put a quarter or more
 * of the commits near 2.3 ms (mean 1.6-1.8).
 */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef void *(*new_device_fn)(const char *);
typedef void *(*new_fn)(void *);
typedef void (*handle_fn)(void *);
typedef void *(*new_geometry_fn)(void *, int);
typedef void *(*new_buffer_fn)(void *, int, unsigned, int, size_t, size_t);
typedef unsigned (*attach_fn)(void *, void *);

static new_device_fn NewDevice;
static new_fn NewScene;
static handle_fn CommitScene, ReleaseScene, CommitGeometry, ReleaseGeometry;
static new_geometry_fn NewGeometry;
static new_buffer_fn SetNewGeometryBuffer;
static attach_fn AttachGeometry;

#define TRIANGLES 10000
#define COMMITS 400
#define WARMUP 50
#define MOST_THREADS 4

static void *device, *scene;

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* The grid bench/cases.ts and bench/baseline.c build. */
static void build(void) {
  long cells = (TRIANGLES + 1) / 2, cols = (long)ceil(sqrt((double)cells)), rows = (cells + cols - 1) / cols;
  scene = NewScene(device);
  void *g = NewGeometry(device, 0);
  float *v = SetNewGeometryBuffer(g, 1, 0, 0x9003, 12, (size_t)((cols + 1) * (rows + 1)));
  unsigned *ix = SetNewGeometryBuffer(g, 0, 0, 0x5003, 12, TRIANGLES);
  for (long y = 0; y <= rows; y++)
    for (long x = 0; x <= cols; x++) {
      float *p = v + 3 * (y * (cols + 1) + x);
      p[0] = (float)x;
      p[1] = (float)y;
      p[2] = (float)((x * 7 + y * 13) % 17) / 17.0f;
    }
  for (long t = 0; t < TRIANGLES; t++) {
    long cell = t / 2, x = cell % cols, y = cell / cols;
    unsigned a = (unsigned)(y * (cols + 1) + x), b = a + 1, c = a + (unsigned)cols + 1, d = c + 1;
    unsigned *i = ix + 3 * t;
    if (t % 2 == 0) { i[0] = a; i[1] = b; i[2] = c; }
    else { i[0] = b; i[1] = d; i[2] = c; }
  }
  CommitGeometry(g);
  AttachGeometry(scene, g);
  ReleaseGeometry(g);
}

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int go, done;
} worker;

static worker workers[MOST_THREADS];

static void *worker_main(void *arg) {
  worker *w = arg;
  for (;;) {
    pthread_mutex_lock(&w->mu);
    while (!w->go) pthread_cond_wait(&w->cv, &w->mu);
    w->go = 0;
    pthread_mutex_unlock(&w->mu);
    CommitScene(scene);
    pthread_mutex_lock(&w->mu);
    w->done = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
  }
  return 0;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void run(int pool) {
  double ms[COMMITS], sum = 0;
  for (int k = 0; k < COMMITS; k++) {
    build();
    double start = now_ms();
    if (pool == 0) {
      CommitScene(scene);
    } else {
      worker *w = &workers[k % pool];
      pthread_mutex_lock(&w->mu);
      w->go = 1;
      pthread_cond_signal(&w->cv);
      while (!w->done) pthread_cond_wait(&w->cv, &w->mu);
      w->done = 0;
      pthread_mutex_unlock(&w->mu);
    }
    ms[k] = now_ms() - start;
    ReleaseScene(scene);
  }
  int n = COMMITS - WARMUP;
  for (int k = WARMUP; k < COMMITS; k++) sum += ms[k];
  qsort(ms + WARMUP, (size_t)n, sizeof(double), by_value);
  printf("%d thread%s in turn: median %.2f  p80 %.2f  p90 %.2f  mean %.2f ms\n", pool, pool == 1 ? "" : "s",
         ms[WARMUP + n / 2], ms[WARMUP + n * 8 / 10], ms[WARMUP + n * 9 / 10], sum / n);
}

int main(void) {
  const char *override = getenv("EMBREE_LIBRARY");
  void *lib = override && *override ? dlopen(override, RTLD_NOW) : dlopen("libembree4.so.4", RTLD_NOW);
  if (!lib) lib = dlopen("libembree3.so.3", RTLD_NOW);
  if (!lib) {
    fprintf(stderr, "lane-threads: no Embree library: %s\n", dlerror());
    return 1;
  }
  *(void **)&NewDevice = dlsym(lib, "rtcNewDevice");
  *(void **)&NewScene = dlsym(lib, "rtcNewScene");
  *(void **)&CommitScene = dlsym(lib, "rtcCommitScene");
  *(void **)&ReleaseScene = dlsym(lib, "rtcReleaseScene");
  *(void **)&NewGeometry = dlsym(lib, "rtcNewGeometry");
  *(void **)&SetNewGeometryBuffer = dlsym(lib, "rtcSetNewGeometryBuffer");
  *(void **)&CommitGeometry = dlsym(lib, "rtcCommitGeometry");
  *(void **)&ReleaseGeometry = dlsym(lib, "rtcReleaseGeometry");
  *(void **)&AttachGeometry = dlsym(lib, "rtcAttachGeometry");
  device = NewDevice(NULL);
  for (int i = 0; i < MOST_THREADS; i++) {
    pthread_t t;
    pthread_mutex_init(&workers[i].mu, 0);
    pthread_cond_init(&workers[i].cv, 0);
    pthread_create(&t, 0, worker_main, &workers[i]);
  }
  for (int pool = 0; pool <= MOST_THREADS; pool++) run(pool);
  for (int pool = 0; pool <= MOST_THREADS; pool++) run(pool);
  return 0;
}
