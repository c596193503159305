/*
 * The C baseline of memlife's benchmarks: the same native calls as bench/cases.ts, from C.
 *
 * It needs no OpenCL or Embree headers and links against neither library: the few prototypes are
 * declared here and the libraries are opened with dlopen, exactly like memlife does (same names,
 * same OPENCL_LIBRARY / EMBREE_LIBRARY overrides, same MEMLIFE_OPENCL_PLATFORM / _DEVICE device
 * choice). So a machine with gcc and libc6-dev can build it, and a missing library turns its cases
 * into "unavailable" lines instead of a link error.
 *
 * Output: one JSON object per line on stdout, in the format bench/measure.ts writes.
 * Build:  cc -O2 -o bench/baseline bench/baseline.c -ldl -lpthread -lm   (bench/main.ts does it)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* ---- OpenCL, declared by hand (cl.h values) ------------------------------------------------ */
typedef int32_t cl_int;
typedef uint32_t cl_uint;
typedef uint64_t cl_bitfield;
typedef void *cl_handle; /* cl_platform_id, cl_device_id, cl_context, cl_command_queue, cl_mem, cl_event */

#define CL_PLATFORM_NAME 0x0902
#define CL_DEVICE_NAME 0x102B
#define CL_DEVICE_TYPE_ALL 0xFFFFFFFFull
#define CL_MEM_READ_WRITE (1ull << 0)
#define CL_MEM_USE_HOST_PTR (1ull << 3)

static struct {
  cl_int (*clGetPlatformIDs)(cl_uint, cl_handle *, cl_uint *);
  cl_int (*clGetPlatformInfo)(cl_handle, cl_uint, size_t, void *, size_t *);
  cl_int (*clGetDeviceIDs)(cl_handle, cl_bitfield, cl_uint, cl_handle *, cl_uint *);
  cl_int (*clGetDeviceInfo)(cl_handle, cl_uint, size_t, void *, size_t *);
  cl_handle (*clCreateContext)(const intptr_t *, cl_uint, const cl_handle *, void *, void *, cl_int *);
  cl_handle (*clCreateCommandQueue)(cl_handle, cl_handle, cl_bitfield, cl_int *);
  cl_int (*clReleaseCommandQueue)(cl_handle);
  cl_int (*clReleaseContext)(cl_handle);
  cl_int (*clFinish)(cl_handle);
  cl_handle (*clCreateBuffer)(cl_handle, cl_bitfield, size_t, void *, cl_int *);
  cl_int (*clReleaseMemObject)(cl_handle);
  cl_int (*clSetMemObjectDestructorCallback)(cl_handle, void (*)(cl_handle, void *), void *);
  cl_int (*clReleaseEvent)(cl_handle);
  /* OpenCL 2.0: may be absent */
  void *(*clSVMAlloc)(cl_handle, cl_bitfield, size_t, cl_uint);
  void (*clSVMFree)(cl_handle, void *);
  cl_int (*clEnqueueSVMFree)(cl_handle, cl_uint, void *[], void (*)(cl_handle, cl_uint, void *[], void *), void *,
                             cl_uint, const cl_handle *, cl_handle *);
  cl_int (*clEnqueueSVMMemcpy)(cl_handle, cl_uint, void *, const void *, size_t, cl_uint, const cl_handle *, cl_handle *);
  cl_int (*clSetKernelArgSVMPointer)(cl_handle, cl_uint, const void *);
  /* the pipeline case: programs, kernels, commands */
  cl_handle (*clCreateProgramWithSource)(cl_handle, cl_uint, const char **, const size_t *, cl_int *);
  cl_int (*clBuildProgram)(cl_handle, cl_uint, const cl_handle *, const char *, void *, void *);
  cl_handle (*clCreateKernel)(cl_handle, const char *, cl_int *);
  cl_int (*clSetKernelArg)(cl_handle, cl_uint, size_t, const void *);
  cl_int (*clEnqueueNDRangeKernel)(cl_handle, cl_handle, cl_uint, const size_t *, const size_t *, const size_t *, cl_uint,
                                   const cl_handle *, cl_handle *);
  cl_int (*clEnqueueWriteBuffer)(cl_handle, cl_handle, cl_uint, size_t, size_t, const void *, cl_uint, const cl_handle *,
                                 cl_handle *);
  cl_int (*clWaitForEvents)(cl_uint, const cl_handle *);
  cl_int (*clReleaseKernel)(cl_handle);
  cl_int (*clReleaseProgram)(cl_handle);
} cl;

/* ---- Embree 3/4, declared by hand (rtcore_*.h values; the calls used are the same in both) ---- */
#define RTC_GEOMETRY_TYPE_TRIANGLE 0
#define RTC_BUFFER_TYPE_INDEX 0
#define RTC_BUFFER_TYPE_VERTEX 1
#define RTC_FORMAT_UINT3 0x5003
#define RTC_FORMAT_FLOAT3 0x9003
typedef bool (*RTCMemoryMonitorFunction)(void *user, ssize_t bytes, bool post);

static struct {
  void *(*rtcNewDevice)(const char *);
  void (*rtcReleaseDevice)(void *);
  void (*rtcSetDeviceMemoryMonitorFunction)(void *, RTCMemoryMonitorFunction, void *);
  void *(*rtcNewScene)(void *);
  void (*rtcCommitScene)(void *);
  void (*rtcReleaseScene)(void *);
  void *(*rtcNewGeometry)(void *, int);
  void *(*rtcSetNewGeometryBuffer)(void *, int, unsigned, int, size_t, size_t);
  void (*rtcCommitGeometry)(void *);
  unsigned (*rtcAttachGeometry)(void *, void *);
  void (*rtcReleaseGeometry)(void *);
} rtc;

/* ---- options and output ---------------------------------------------------------------------- */
static struct {
  bool quick;
  const char *filter;       /* substring of the case name, or NULL */
  const char *group;        /* "opencl", "embree" or "all" */
  double sample_ms;         /* each sample runs at least this long */
  double warmup_ms;
  int samples;
  const char *triangles;    /* comma-separated list of triangle counts */
} opt = { false, NULL, "all", 50, 100, 5, "10000,100000,1000000,2000000" };

static bool wanted(const char *name) {
  return opt.filter == NULL || strcasestr(name, opt.filter) != NULL;
}

/* Strings in our output are case names and library messages: escape what JSON requires. */
static void json_string(const char *s) {
  putchar('"');
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') printf("\\%c", *s);
    else if ((unsigned char)*s < 0x20) printf("\\u%04x", *s);
    else putchar(*s);
  }
  putchar('"');
}

static void unavailable(const char *name, const char *fmt, ...) {
  char reason[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(reason, sizeof reason, fmt, ap);
  va_end(ap);
  printf("{\"type\":\"unavailable\",\"case\":");
  json_string(name);
  printf(",\"runtime\":\"c\",\"impl\":\"C\",\"reason\":");
  json_string(reason);
  printf("}\n");
  fflush(stdout);
}

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Quantile of sorted values, linear between neighbours (the same rule as bench/measure.ts). */
static double quantile(const double *sorted, int n, double q) {
  double pos = (n - 1) * q;
  int lo = (int)floor(pos), hi = (int)ceil(pos);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}

/*
 * One benchmark: `run(n, ctx)` performs n operations and returns the nanoseconds to count (its own
 * timing of the part that matters, or a negative number to count the whole call). The method is the
 * one bench/measure.ts uses: warm up for warmup_ms while finding an n that runs >= sample_ms, then
 * take `samples` samples of n operations; report per-operation nanoseconds.
 */
typedef double (*run_fn)(long n, void *ctx);

static double timed(run_fn run, long n, void *ctx) {
  double start = now_ns();
  double counted = run(n, ctx);
  return counted >= 0 ? counted : now_ns() - start;
}

/* The Embree cases with a monitor report its calls per build beside the time. */
static bool report_monitor;
static long monitor_calls, builds;

static void measure(const char *name, long items, run_fn run, void *ctx) {
  long n = 1;
  double spent = 0, elapsed = 0;
  /* Warm up and calibrate: grow n until one run takes sample_ms, and keep going until warmup_ms. */
  for (;;) {
    elapsed = timed(run, n, ctx);
    spent += elapsed;
    if (elapsed >= opt.sample_ms * 1e6 && spent >= opt.warmup_ms * 1e6) break;
    if (elapsed < opt.sample_ms * 1e6) {
      double per = elapsed / n;
      long next = per > 0 ? (long)(opt.sample_ms * 1e6 / per * 1.1) + 1 : n * 2;
      n = next > n * 10 ? n * 10 : next < n ? n : next;
    }
  }
  double per_op[64];
  int samples = opt.samples > 64 ? 64 : opt.samples;
  for (int i = 0; i < samples; i++) per_op[i] = timed(run, n, ctx) / n;
  double sorted[64];
  memcpy(sorted, per_op, sizeof(double) * samples);
  qsort(sorted, samples, sizeof(double), cmp_double);
  printf("{\"type\":\"result\",\"case\":");
  json_string(name);
  printf(",\"runtime\":\"c\",\"impl\":\"C\",\"iterations\":%ld,\"items\":%ld,\"median\":%.3f,\"min\":%.3f,"
         "\"max\":%.3f,\"q1\":%.3f,\"q3\":%.3f,\"samples\":[",
         n, items, quantile(sorted, samples, 0.5), sorted[0], sorted[samples - 1], quantile(sorted, samples, 0.25),
         quantile(sorted, samples, 0.75));
  for (int i = 0; i < samples; i++) printf("%s%.3f", i ? "," : "", per_op[i]);
  printf("]");
  if (report_monitor && builds > 0) printf(",\"perOp\":{\"monitorCalls\":%ld}", (monitor_calls + builds / 2) / builds);
  printf("}\n");
  fflush(stdout);
}

/* ---- library loading --------------------------------------------------------------------------- */
static void *open_first(const char *env, const char *const *names, char *why, size_t why_size) {
  const char *override = getenv(env);
  why[0] = 0;
  if (override && *override) {
    void *h = dlopen(override, RTLD_NOW | RTLD_GLOBAL);
    if (!h) snprintf(why, why_size, "%s", dlerror());
    return h;
  }
  for (; *names; names++) {
    void *h = dlopen(*names, RTLD_NOW | RTLD_GLOBAL);
    if (h) return h;
    snprintf(why + strlen(why), why_size - strlen(why), "%s%s", why[0] ? "; " : "", dlerror());
  }
  return NULL;
}

#define BIND(table, lib, name) (*(void **)&table.name = dlsym(lib, #name))

/* ---- OpenCL cases ------------------------------------------------------------------------------ */
static cl_handle context, queue;

static bool matches(const char *selector, int index, const char *name) {
  char *end;
  long i = strtol(selector, &end, 10);
  if (*selector && *end == 0) return i == index;
  return strcasestr(name, selector) != NULL;
}

/* The device memlife's createContext() would pick: MEMLIFE_OPENCL_PLATFORM / _DEVICE, else the first. */
static cl_handle pick_device(char *label, size_t label_size) {
  cl_handle platforms[16], devices[64];
  cl_uint np = 0, nd = 0;
  if (cl.clGetPlatformIDs(16, platforms, &np) != 0 || np == 0) return NULL;
  const char *psel = getenv("MEMLIFE_OPENCL_PLATFORM"), *dsel = getenv("MEMLIFE_OPENCL_DEVICE");
  if (psel && !*psel) psel = NULL;
  if (dsel && !*dsel) dsel = NULL;
  for (cl_uint p = 0; p < np && p < 16; p++) {
    char pname[256] = "";
    cl.clGetPlatformInfo(platforms[p], CL_PLATFORM_NAME, sizeof pname, pname, NULL);
    if (psel && !matches(psel, (int)p, pname)) continue;
    cl_uint n = 0;
    if (cl.clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 64 - nd, devices + nd, &n) == 0) nd += n < 64 - nd ? n : 64 - nd;
    if (psel) break; /* like memlife: the first platform that matches */
  }
  for (cl_uint d = 0; d < nd; d++) {
    char dname[256] = "";
    cl.clGetDeviceInfo(devices[d], CL_DEVICE_NAME, sizeof dname, dname, NULL);
    if (dsel && !matches(dsel, (int)d, dname)) continue;
    snprintf(label, label_size, "%s", dname);
    return devices[d];
  }
  return NULL;
}

static volatile long destroyed_count;
static void on_destroyed(cl_handle mem, void *user) {
  (void)mem;
  (void)user;
  __atomic_add_fetch(&destroyed_count, 1, __ATOMIC_RELAXED);
}

/* PoCL calls destructor callbacks inside clReleaseMemObject; a GPU driver may call them later. */
static void wait_destroyed(long expected) {
  while (__atomic_load_n(&destroyed_count, __ATOMIC_RELAXED) < expected) sched_yield();
}

typedef struct {
  size_t size;
  int callbacks;
  bool use_host_ptr;
  void *host;
} buffer_case;

static double run_buffer(long n, void *p) {
  buffer_case *c = p;
  cl_bitfield flags = CL_MEM_READ_WRITE | (c->use_host_ptr ? CL_MEM_USE_HOST_PTR : 0);
  long expected = destroyed_count;
  for (long i = 0; i < n; i++) {
    cl_int err;
    cl_handle mem = cl.clCreateBuffer(context, flags, c->size, c->use_host_ptr ? c->host : NULL, &err);
    if (!mem) {
      fprintf(stderr, "baseline: clCreateBuffer(%zu) failed: %d\n", c->size, err);
      exit(1);
    }
    for (int k = 0; k < c->callbacks; k++) cl.clSetMemObjectDestructorCallback(mem, on_destroyed, NULL);
    cl.clReleaseMemObject(mem);
    expected += c->callbacks;
    /* "await destroyed": the host memory may be reused only once the callback ran. */
    if (c->use_host_ptr) wait_destroyed(expected);
  }
  wait_destroyed(expected);
  return -1;
}

static volatile long freed_count;
static void on_svm_free(cl_handle q, cl_uint count, void *pointers[], void *user) {
  (void)q;
  (void)user;
  /* With a pfn_free_func the application frees the pointers (OpenCL 2.0, clEnqueueSVMFree). */
  for (cl_uint i = 0; i < count; i++) cl.clSVMFree(context, pointers[i]);
  __atomic_add_fetch(&freed_count, 1, __ATOMIC_RELAXED);
}

typedef struct {
  int mode; /* 0: enqueueSVMFree, 1: enqueueSVMFree with a free callback, 2: clSVMFree */
} svm_case;

/* The batch after which the JS cases await queue.finish(): the same here, so both queue the same work. */
#define SVM_BATCH 256

static double run_svm(long n, void *p) {
  svm_case *c = p;
  for (long i = 0; i < n; i++) {
    void *ptr = cl.clSVMAlloc(context, CL_MEM_READ_WRITE, 4096, 0);
    if (!ptr) {
      fprintf(stderr, "baseline: clSVMAlloc failed\n");
      exit(1);
    }
    if (c->mode == 2) {
      cl.clSVMFree(context, ptr);
      continue;
    }
    cl_handle event;
    void *pointers[1] = { ptr };
    cl.clEnqueueSVMFree(queue, 1, pointers, c->mode == 1 ? on_svm_free : NULL, NULL, 0, NULL, &event);
    cl.clReleaseEvent(event);
    if ((i + 1) % SVM_BATCH == 0) cl.clFinish(queue);
  }
  if (c->mode != 2) cl.clFinish(queue);
  return -1;
}

/* The pipeline case (bench/plan.ts): the kernel source is pipelineKernel there, verbatim. */
static const char *pipeline_source = "__kernel void pipeline(__global const int *in, __global int *out, int k) "
                                     "{ size_t i = get_global_id(0); out[i] = in[i] * k + 1; }";
static cl_handle pipeline_kernel;
static int32_t pipeline_in[1024], pipeline_out[1024];

/* Per iteration: buffer + destructor callback, SVM, write, kernel, read back awaited, SVM freed in queue order, release. */
static double run_pipeline(long n, void *p) {
  (void)p;
  const size_t size = sizeof pipeline_in, global = size / 4;
  const int32_t k = 3;
  long expected = destroyed_count;
  for (long i = 0; i < n; i++) {
    cl_int err;
    cl_handle mem = cl.clCreateBuffer(context, CL_MEM_READ_WRITE, size, NULL, &err);
    if (!mem) {
      fprintf(stderr, "baseline: clCreateBuffer failed: %d\n", err);
      exit(1);
    }
    cl.clSetMemObjectDestructorCallback(mem, on_destroyed, NULL);
    void *svm = cl.clSVMAlloc(context, CL_MEM_READ_WRITE, size, 0);
    if (!svm) {
      fprintf(stderr, "baseline: clSVMAlloc failed\n");
      exit(1);
    }
    cl_handle event;
    cl.clEnqueueWriteBuffer(queue, mem, 0, 0, size, pipeline_in, 0, NULL, &event);
    cl.clReleaseEvent(event);
    cl.clSetKernelArg(pipeline_kernel, 0, sizeof mem, &mem);
    cl.clSetKernelArgSVMPointer(pipeline_kernel, 1, svm);
    cl.clSetKernelArg(pipeline_kernel, 2, sizeof k, &k);
    err = cl.clEnqueueNDRangeKernel(queue, pipeline_kernel, 1, NULL, &global, NULL, 0, NULL, &event);
    if (err != 0) {
      fprintf(stderr, "baseline: clEnqueueNDRangeKernel failed: %d\n", err);
      exit(1);
    }
    cl.clReleaseEvent(event);
    cl.clEnqueueSVMMemcpy(queue, 0, pipeline_out, svm, size, 0, NULL, &event);
    cl.clWaitForEvents(1, &event);
    cl.clReleaseEvent(event);
    void *pointers[1] = { svm };
    cl.clEnqueueSVMFree(queue, 1, pointers, NULL, NULL, 0, NULL, &event);
    cl.clReleaseEvent(event);
    cl.clReleaseMemObject(mem);
    expected++;
  }
  cl.clFinish(queue);
  wait_destroyed(expected);
  if (pipeline_out[1023] != 1023 * 3 + 1) {
    fprintf(stderr, "baseline: the pipeline computed a wrong result\n");
    exit(1);
  }
  return -1;
}

static void pipeline_case(const char *name) {
  if (!cl.clSVMAlloc || !cl.clEnqueueSVMFree || !cl.clEnqueueSVMMemcpy || !cl.clSetKernelArgSVMPointer) {
    unavailable(name, "the OpenCL library has no SVM entry points (OpenCL 2.0)");
    return;
  }
  void *probe = cl.clSVMAlloc(context, CL_MEM_READ_WRITE, 4096, 0);
  if (!probe) {
    unavailable(name, "clSVMAlloc returned NULL: the device has no SVM");
    return;
  }
  cl.clSVMFree(context, probe);
  cl_int err = 0;
  cl_handle program = cl.clCreateProgramWithSource(context, 1, &pipeline_source, NULL, &err);
  if (!program || cl.clBuildProgram(program, 0, NULL, "", NULL, NULL) != 0) {
    unavailable(name, "the pipeline kernel does not build (%d)", err);
    return;
  }
  pipeline_kernel = cl.clCreateKernel(program, "pipeline", &err);
  if (!pipeline_kernel) {
    unavailable(name, "clCreateKernel failed: %d", err);
    return;
  }
  for (int i = 0; i < 1024; i++) pipeline_in[i] = i;
  measure(name, 1, run_pipeline, NULL);
  cl.clReleaseKernel(pipeline_kernel);
  cl.clReleaseProgram(program);
}

static void opencl_cases(void) {
  static const char *const names[] = { "libOpenCL.so.1", "libOpenCL.so", NULL };
  static const struct { size_t size; const char *name; } sizes[] = {
    { 64, "buffer 64 B" }, { 4096, "buffer 4 KiB" }, { 1 << 20, "buffer 1 MiB" }, { 16 << 20, "buffer 16 MiB" },
  };
  const char *all[] = { "buffer 64 B", "buffer 4 KiB", "buffer 1 MiB", "buffer 16 MiB", "buffer 4 KiB +1 destructor",
                        "buffer 4 KiB +4 destructors", "buffer 4 KiB await destroyed", "buffer 4 KiB hostPtr use",
                        "svm 4 KiB enqueueSVMFree", "svm 4 KiB enqueueSVMFree+onFree", "svm 4 KiB release",
                        "pipeline 4 KiB" };
  const int count = sizeof all / sizeof *all;
  char why[2048];
  void *lib = open_first("OPENCL_LIBRARY", names, why, sizeof why);
  if (!lib) {
    for (int i = 0; i < count; i++) if (wanted(all[i])) unavailable(all[i], "no OpenCL library: %s", why);
    return;
  }
  BIND(cl, lib, clGetPlatformIDs); BIND(cl, lib, clGetPlatformInfo); BIND(cl, lib, clGetDeviceIDs);
  BIND(cl, lib, clGetDeviceInfo); BIND(cl, lib, clCreateContext); BIND(cl, lib, clCreateCommandQueue);
  BIND(cl, lib, clReleaseCommandQueue); BIND(cl, lib, clReleaseContext); BIND(cl, lib, clFinish);
  BIND(cl, lib, clCreateBuffer); BIND(cl, lib, clReleaseMemObject); BIND(cl, lib, clSetMemObjectDestructorCallback);
  BIND(cl, lib, clReleaseEvent); BIND(cl, lib, clSVMAlloc); BIND(cl, lib, clSVMFree); BIND(cl, lib, clEnqueueSVMFree);
  BIND(cl, lib, clEnqueueSVMMemcpy); BIND(cl, lib, clSetKernelArgSVMPointer); BIND(cl, lib, clCreateProgramWithSource);
  BIND(cl, lib, clBuildProgram); BIND(cl, lib, clCreateKernel); BIND(cl, lib, clSetKernelArg);
  BIND(cl, lib, clEnqueueNDRangeKernel); BIND(cl, lib, clEnqueueWriteBuffer); BIND(cl, lib, clWaitForEvents);
  BIND(cl, lib, clReleaseKernel); BIND(cl, lib, clReleaseProgram);

  char device_name[256] = "";
  cl_handle device = pick_device(device_name, sizeof device_name);
  cl_int err = 0;
  if (device) context = cl.clCreateContext(NULL, 1, &device, NULL, NULL, &err);
  if (device) queue = context ? cl.clCreateCommandQueue(context, device, 0, &err) : NULL;
  if (!queue) {
    for (int i = 0; i < count; i++)
      if (wanted(all[i])) unavailable(all[i], device ? "OpenCL context/queue failed: %d" : "no OpenCL device selected", err);
    return;
  }
  printf("{\"type\":\"info\",\"runtime\":\"c\",\"device\":");
  json_string(device_name);
  printf("}\n");

  static char host[16 << 20] __attribute__((aligned(4096)));
  for (int i = 0; i < 4; i++) {
    buffer_case c = { sizes[i].size, 0, false, NULL };
    if (wanted(sizes[i].name)) measure(sizes[i].name, 1, run_buffer, &c);
  }
  buffer_case cb1 = { 4096, 1, false, NULL }, cb4 = { 4096, 4, false, NULL }, use = { 4096, 1, true, host };
  if (wanted(all[4])) measure(all[4], 1, run_buffer, &cb1);
  if (wanted(all[5])) measure(all[5], 1, run_buffer, &cb4);
  /* "await destroyed" in C: the callback that tells, and nothing else to wait for (PoCL runs it inside release). */
  if (wanted(all[6])) measure(all[6], 1, run_buffer, &cb1);
  if (wanted(all[7])) measure(all[7], 1, run_buffer, &use);

  for (int mode = 0; mode < 3; mode++) {
    const char *name = all[8 + mode];
    if (!wanted(name)) continue;
    if (!cl.clSVMAlloc || !cl.clEnqueueSVMFree || !cl.clSVMFree) {
      unavailable(name, "the OpenCL library has no SVM entry points (OpenCL 2.0)");
      continue;
    }
    void *probe = cl.clSVMAlloc(context, CL_MEM_READ_WRITE, 4096, 0);
    if (!probe) {
      unavailable(name, "clSVMAlloc returned NULL: the device has no SVM");
      continue;
    }
    cl.clSVMFree(context, probe);
    svm_case c = { mode };
    measure(name, 1, run_svm, &c);
  }
  if (wanted(all[11])) pipeline_case(all[11]);
  cl.clReleaseCommandQueue(queue);
  cl.clReleaseContext(context);
}

/* ---- Embree cases ------------------------------------------------------------------------------- */
static long live_bytes;
static long budget_bytes = 1L << 30;

static bool monitor_count(void *user, ssize_t bytes, bool post) {
  (void)user;
  (void)post;
  __atomic_add_fetch(&monitor_calls, 1, __ATOMIC_RELAXED);
  __atomic_add_fetch(&live_bytes, bytes, __ATOMIC_RELAXED);
  return true;
}

/* A budget as memlife's setMemoryBudget gives one: refuse an allocation that would go over it. */
static bool monitor_budget(void *user, ssize_t bytes, bool post) {
  (void)user;
  __atomic_add_fetch(&monitor_calls, 1, __ATOMIC_RELAXED);
  if (bytes > 0 && !post && __atomic_load_n(&live_bytes, __ATOMIC_RELAXED) + bytes > budget_bytes) return false;
  __atomic_add_fetch(&live_bytes, bytes, __ATOMIC_RELAXED);
  return true;
}

typedef struct {
  void *device;
  long triangles;
} embree_case;

/* The mesh bench/cases.ts builds: a grid of quads, two triangles each, with a bumpy height. */
static void fill_mesh(float *v, unsigned *idx, long triangles) {
  long cells = (triangles + 1) / 2;
  long cols = (long)ceil(sqrt((double)cells));
  long rows = (cells + cols - 1) / cols;
  for (long y = 0; y <= rows; y++)
    for (long x = 0; x <= cols; x++) {
      float *p = v + 3 * (y * (cols + 1) + x);
      p[0] = (float)x;
      p[1] = (float)y;
      p[2] = (float)((x * 7 + y * 13) % 17) / 17.0f;
    }
  for (long t = 0; t < triangles; t++) {
    long cell = t / 2, x = cell % cols, y = cell / cols;
    unsigned a = (unsigned)(y * (cols + 1) + x), b = a + 1, c = a + (unsigned)(cols + 1), d = c + 1;
    unsigned *i = idx + 3 * t;
    if (t % 2 == 0) { i[0] = a; i[1] = b; i[2] = c; }
    else { i[0] = b; i[1] = d; i[2] = c; }
  }
}

static long mesh_vertices(long triangles) {
  long cells = (triangles + 1) / 2;
  long cols = (long)ceil(sqrt((double)cells));
  long rows = (cells + cols - 1) / cols;
  return (cols + 1) * (rows + 1);
}

/* n builds; only rtcCommitScene is counted (scene set-up and release are outside the timing). */
static double run_embree(long n, void *p) {
  embree_case *c = p;
  double counted = 0;
  long nv = mesh_vertices(c->triangles);
  for (long i = 0; i < n; i++) {
    void *scene = rtc.rtcNewScene(c->device);
    void *geom = rtc.rtcNewGeometry(c->device, RTC_GEOMETRY_TYPE_TRIANGLE);
    float *v = rtc.rtcSetNewGeometryBuffer(geom, RTC_BUFFER_TYPE_VERTEX, 0, RTC_FORMAT_FLOAT3, 12, nv);
    unsigned *idx = rtc.rtcSetNewGeometryBuffer(geom, RTC_BUFFER_TYPE_INDEX, 0, RTC_FORMAT_UINT3, 12, c->triangles);
    fill_mesh(v, idx, c->triangles);
    rtc.rtcCommitGeometry(geom);
    rtc.rtcAttachGeometry(scene, geom);
    rtc.rtcReleaseGeometry(geom);
    double start = now_ns();
    rtc.rtcCommitScene(scene);
    counted += now_ns() - start;
    rtc.rtcReleaseScene(scene);
    builds++;
  }
  return counted;
}

static void embree_cases(void) {
  static const char *const names[] = { "libembree4.so.4", "libembree3.so.3", NULL };
  char why[2048];
  void *lib = open_first("EMBREE_LIBRARY", names, why, sizeof why);
  if (lib) {
    Dl_info info;
    void *sym = dlsym(lib, "rtcNewDevice");
    if (sym && dladdr(sym, &info) && info.dli_fname) {
      printf("{\"type\":\"info\",\"runtime\":\"c\",\"embree\":");
      json_string(info.dli_fname);
      printf("}\n");
    }
  }
  char list[256];
  snprintf(list, sizeof list, "%s", opt.triangles);
  for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    long triangles = atol(tok);
    static const char *const variants[] = { "", " +monitor", " +budget" };
    for (int m = 0; m < 3; m++) {
      char name[128];
      if (triangles % 1000000 == 0) snprintf(name, sizeof name, "embree %ldM tri%s", triangles / 1000000, variants[m]);
      else snprintf(name, sizeof name, "embree %ldk tri%s", triangles / 1000, variants[m]);
      if (!wanted(name)) continue;
      if (!lib) {
        unavailable(name, "no Embree library: %s", why);
        continue;
      }
      BIND(rtc, lib, rtcNewDevice); BIND(rtc, lib, rtcReleaseDevice); BIND(rtc, lib, rtcSetDeviceMemoryMonitorFunction);
      BIND(rtc, lib, rtcNewScene); BIND(rtc, lib, rtcCommitScene); BIND(rtc, lib, rtcReleaseScene);
      BIND(rtc, lib, rtcNewGeometry); BIND(rtc, lib, rtcSetNewGeometryBuffer); BIND(rtc, lib, rtcCommitGeometry);
      BIND(rtc, lib, rtcAttachGeometry); BIND(rtc, lib, rtcReleaseGeometry);
      embree_case c = { rtc.rtcNewDevice(getenv("MEMLIFE_BENCH_EMBREE_CONFIG")), triangles };
      if (!c.device) {
        unavailable(name, "rtcNewDevice returned NULL (MEMLIFE_BENCH_EMBREE_CONFIG=%s)", getenv("MEMLIFE_BENCH_EMBREE_CONFIG") ? getenv("MEMLIFE_BENCH_EMBREE_CONFIG") : "");
        continue;
      }
      live_bytes = monitor_calls = builds = 0;
      report_monitor = m != 0;
      if (m == 1) rtc.rtcSetDeviceMemoryMonitorFunction(c.device, monitor_count, NULL);
      if (m == 2) rtc.rtcSetDeviceMemoryMonitorFunction(c.device, monitor_budget, NULL);
      measure(name, triangles, run_embree, &c);
      rtc.rtcReleaseDevice(c.device);
    }
  }
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--quick")) opt.quick = true;
    else if (!strncmp(a, "--filter=", 9)) opt.filter = a + 9;
    else if (!strncmp(a, "--group=", 8)) opt.group = a + 8;
    else if (!strncmp(a, "--sample-ms=", 12)) opt.sample_ms = atof(a + 12);
    else if (!strncmp(a, "--warmup-ms=", 12)) opt.warmup_ms = atof(a + 12);
    else if (!strncmp(a, "--samples=", 10)) opt.samples = atoi(a + 10);
    else if (!strncmp(a, "--triangles=", 12)) opt.triangles = a + 12;
    else if (!strncmp(a, "--budget=", 9)) budget_bytes = atol(a + 9);
    else {
      fprintf(stderr, "baseline: unknown argument %s\n", a);
      return 2;
    }
  }
  if (opt.filter && !*opt.filter) opt.filter = NULL;
  if (!strcmp(opt.group, "all") || !strcmp(opt.group, "opencl")) opencl_cases();
  if (!strcmp(opt.group, "all") || !strcmp(opt.group, "embree")) embree_cases();
  return 0;
}
