/*
 * The C side of test/differential.spec.ts: a fixed script of OpenCL and Embree calls, made straight
 * through the C APIs, printing one JSON line per observation: {"k": key, "v": value}.
 * test/differential/probe.ts makes the same calls through memlife and prints the same keys.
 *
 * Value forms (both probes): {"ok":true,...} a call that succeeded, {"code":N,"fn":"clX"} a status
 * or error code, {"null":true,"fn":"clSVMAlloc"} clSVMAlloc's NULL (it has no code); plain values
 * for info queries. The spec builds it against the very libraries memlife loaded, e.g.
 *   cc -O1 -DEMBREE_MAJOR=3 -o probe probe.c -l:libOpenCL.so.1 -l:libembree3.so.3
 * Values that do not fit a parameter's C type are cast here as a C caller's would be (truncated).
 */
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#if EMBREE_MAJOR == 4
#include <embree4/rtcore.h>
#else
#include <embree3/rtcore.h>
#endif
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* --- JSON output ------------------------------------------------------------------------------ */

static void json_string(const char *s) {
  putchar('"');
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') printf("\\%c", c);
    else if (c < 0x20) printf("\\u%04x", c);
    else putchar(c);
  }
  putchar('"');
}
static void begin(const char *key) { printf("{\"k\":"); json_string(key); printf(",\"v\":"); }
static void end(void) { printf("}\n"); fflush(stdout); }
static void put_string(const char *key, const char *value) { begin(key); json_string(value); end(); }
static void put_int(const char *key, long long value) { begin(key); printf("%lld", value); end(); }
static void put_code(const char *key, const char *fn, cl_int code) {
  begin(key);
  if (code == CL_SUCCESS) printf("{\"ok\":true}");
  else { printf("{\"code\":%d,\"fn\":", code); json_string(fn); printf("}"); }
  end();
}

/* --- OpenCL ----------------------------------------------------------------------------------- */

static char *info_string(cl_int (*get)(void *, cl_uint, size_t, void *, size_t *), void *h, cl_uint param) {
  size_t n = 0;
  get(h, param, 0, NULL, &n);
  char *s = calloc(n + 1, 1);
  get(h, param, n, s, NULL);
  return s;
}
#define PLATFORM_STRING(p, param) info_string((cl_int (*)(void *, cl_uint, size_t, void *, size_t *))clGetPlatformInfo, p, param)
#define DEVICE_STRING(d, param) info_string((cl_int (*)(void *, cl_uint, size_t, void *, size_t *))clGetDeviceInfo, d, param)

static void put_words(const char *key, const char *text) {
  begin(key);
  printf("[");
  char *copy = strdup(text), *save = NULL;
  int first = 1;
  for (char *w = strtok_r(copy, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
    if (!first) printf(",");
    json_string(w);
    first = 0;
  }
  free(copy);
  printf("]");
  end();
}

static void put_devices(const char *key, cl_platform_id platform, cl_device_type type) {
  cl_uint n = 0;
  cl_int status = clGetDeviceIDs(platform, type, 0, NULL, &n);
  if (status != CL_SUCCESS) return put_code(key, "clGetDeviceIDs", status);
  cl_device_id *ids = calloc(n, sizeof *ids);
  clGetDeviceIDs(platform, type, n, ids, NULL);
  begin(key);
  printf("{\"devices\":[");
  for (cl_uint i = 0; i < n; i++) {
    char *name = DEVICE_STRING(ids[i], CL_DEVICE_NAME);
    if (i) printf(",");
    json_string(name);
    free(name);
  }
  printf("]}");
  end();
  free(ids);
}

/* Written by whichever thread the driver calls back on: read with __atomic_load_n. */
static int destructor_order[8], destructor_count;
static void CL_CALLBACK on_destroyed(cl_mem mem, void *user) {
  (void)mem;
  destructor_order[destructor_count] = (int)(intptr_t)user;
  __atomic_store_n(&destructor_count, destructor_count + 1, __ATOMIC_SEQ_CST);
}

static void sleep_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

/* Up to 5 s for `*counter` to reach `target` (PoCL's clFinish does not wait for every callback). */
static int await_count(int *counter, int target) {
  for (int i = 0; i < 500 && __atomic_load_n(counter, __ATOMIC_SEQ_CST) < target; i++) sleep_ms(10);
  return __atomic_load_n(counter, __ATOMIC_SEQ_CST);
}

#define SVM_N 32
static void *svm_given[SVM_N];
static int svm_calls, svm_seen[SVM_N], svm_seen_count = -1;
static void CL_CALLBACK on_svm_free(cl_command_queue q, cl_uint n, void *pointers[], void *user) {
  cl_context ctx = user;
  (void)q;
  svm_seen_count = (int)n;
  for (cl_uint i = 0; i < n && i < SVM_N; i++) {
    svm_seen[i] = -1;
    for (int j = 0; j < SVM_N; j++) if (pointers[i] == svm_given[j]) svm_seen[i] = j;
    clSVMFree(ctx, pointers[i]);
  }
  __atomic_fetch_add(&svm_calls, 1, __ATOMIC_SEQ_CST);
}

/* `alignment` as the program asked for it: clSVMAlloc gets it as a cl_uint, truncated if need be. */
static void put_svm(const char *key, cl_context ctx, cl_svm_mem_flags flags, size_t size, uint64_t alignment) {
  void *p = clSVMAlloc(ctx, flags, size, (cl_uint)alignment);
  begin(key);
  if (p == NULL) printf("{\"null\":true,\"fn\":\"clSVMAlloc\"}");
  else printf("{\"ok\":true,\"aligned\":%s}", alignment == 0 || (uint64_t)(uintptr_t)p % alignment == 0 ? "true" : "false");
  end();
  if (p) clSVMFree(ctx, p);
}

static cl_int event_int(cl_event e, cl_event_info param) {
  cl_int v = 0;
  clGetEventInfo(e, param, sizeof v, &v, NULL);
  return v;
}

static void opencl(void) {
  cl_uint nplatforms = 0;
  clGetPlatformIDs(0, NULL, &nplatforms);
  put_int("cl.platforms.count", nplatforms);
  if (nplatforms == 0) return;
  cl_platform_id *platforms = calloc(nplatforms, sizeof *platforms);
  clGetPlatformIDs(nplatforms, platforms, NULL);
  cl_platform_id platform = platforms[0];
  char *s;
  put_string("cl.platform.name", s = PLATFORM_STRING(platform, CL_PLATFORM_NAME)); free(s);
  put_string("cl.platform.vendor", s = PLATFORM_STRING(platform, CL_PLATFORM_VENDOR)); free(s);
  put_string("cl.platform.version", s = PLATFORM_STRING(platform, CL_PLATFORM_VERSION)); free(s);
  put_string("cl.platform.profile", s = PLATFORM_STRING(platform, CL_PLATFORM_PROFILE)); free(s);
  put_words("cl.platform.extensions", s = PLATFORM_STRING(platform, CL_PLATFORM_EXTENSIONS)); free(s);

  static const struct { const char *name; cl_device_type type; } types[] = {
    {"DEFAULT", CL_DEVICE_TYPE_DEFAULT}, {"CPU", CL_DEVICE_TYPE_CPU}, {"GPU", CL_DEVICE_TYPE_GPU},
    {"ACCELERATOR", CL_DEVICE_TYPE_ACCELERATOR}, {"CUSTOM", CL_DEVICE_TYPE_CUSTOM}, {"ALL", CL_DEVICE_TYPE_ALL},
    {"CPU|GPU", CL_DEVICE_TYPE_CPU | CL_DEVICE_TYPE_GPU}, {"0x40", 0x40}, {"0", 0},
  };
  for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
    char key[64];
    snprintf(key, sizeof key, "cl.getDeviceIDs.%s", types[i].name);
    put_devices(key, platform, types[i].type);
  }

  /* memlife's default device: the first of the first platform (with CL_DEVICE_TYPE_ALL). */
  cl_device_id device;
  clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL);
  cl_device_type type;
  cl_ulong global, maxalloc;
  cl_uint units;
  cl_device_svm_capabilities caps = 0;
  clGetDeviceInfo(device, CL_DEVICE_TYPE, sizeof type, &type, NULL);
  clGetDeviceInfo(device, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof global, &global, NULL);
  clGetDeviceInfo(device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof maxalloc, &maxalloc, NULL);
  clGetDeviceInfo(device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, NULL);
  if (clGetDeviceInfo(device, CL_DEVICE_SVM_CAPABILITIES, sizeof caps, &caps, NULL) != CL_SUCCESS) caps = 0;
  put_string("cl.device.name", s = DEVICE_STRING(device, CL_DEVICE_NAME)); free(s);
  put_string("cl.device.vendor", s = DEVICE_STRING(device, CL_DEVICE_VENDOR)); free(s);
  put_string("cl.device.version", s = DEVICE_STRING(device, CL_DEVICE_VERSION)); free(s);
  put_string("cl.device.driverVersion", s = DEVICE_STRING(device, CL_DRIVER_VERSION)); free(s);
  put_int("cl.device.typeMask", (long long)type);
  put_int("cl.device.globalMemSize", (long long)global);
  put_int("cl.device.maxMemAllocSize", (long long)maxalloc);
  put_int("cl.device.maxComputeUnits", units);
  begin("cl.device.svm");
  printf("{\"coarseGrainBuffer\":%s,\"fineGrainBuffer\":%s,\"fineGrainSystem\":%s,\"atomics\":%s}",
         caps & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER ? "true" : "false", caps & CL_DEVICE_SVM_FINE_GRAIN_BUFFER ? "true" : "false",
         caps & CL_DEVICE_SVM_FINE_GRAIN_SYSTEM ? "true" : "false", caps & CL_DEVICE_SVM_ATOMICS ? "true" : "false");
  end();

  cl_int err;
  cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
  cl_context other = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
  cl_uint refs;
  clGetContextInfo(ctx, CL_CONTEXT_REFERENCE_COUNT, sizeof refs, &refs, NULL);
  put_int("cl.context.referenceCount", refs);
  cl_command_queue queue = clCreateCommandQueue(ctx, device, 0, &err);
  /* Before any command: PoCL's count includes events that still refer to the queue, which memlife
     may release a little later (after their callbacks reached JS); OpenCL calls the count stale anyway. */
  clRetainCommandQueue(queue);
  clGetCommandQueueInfo(queue, CL_QUEUE_REFERENCE_COUNT, sizeof refs, &refs, NULL);
  put_int("cl.queue.referenceCountAfterRetain", refs);
  clReleaseCommandQueue(queue);

  /* clCreateBuffer with bad arguments. */
  clCreateBuffer(ctx, CL_MEM_READ_WRITE, 0, NULL, &err);
  put_code("cl.createBuffer.size0", "clCreateBuffer", err);
  clCreateBuffer(ctx, CL_MEM_READ_WRITE, maxalloc + 1, NULL, &err);
  put_code("cl.createBuffer.overMaxAlloc", "clCreateBuffer", err);
  clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, 64, NULL, &err);
  put_code("cl.createBuffer.useHostPtrWithoutData", "clCreateBuffer", err);
  clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_WRITE_ONLY, 64, NULL, &err);
  put_code("cl.createBuffer.readOnlyAndWriteOnly", "clCreateBuffer", err);
  clCreateBuffer(NULL, CL_MEM_READ_WRITE, 64, NULL, &err);
  put_code("cl.createBuffer.invalidContext", "clCreateBuffer", err);
  static float host[16];
  cl_mem used = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, sizeof host, host, &err);
  cl_mem_flags flags;
  clGetMemObjectInfo(used, CL_MEM_FLAGS, sizeof flags, &flags, NULL);
  put_int("cl.buffer.useHostPtr.flags", (long long)flags);
  void *hostptr = NULL;
  clGetMemObjectInfo(used, CL_MEM_HOST_PTR, sizeof hostptr, &hostptr, NULL);
  /* memlife exposes CL_MEM_HOST_PTR as an address but not the address of a typed array: compare non-NULL. */
  begin("cl.buffer.useHostPtr.hasHostPointer"); printf(hostptr == (void *)host ? "true" : "false"); end();
  clReleaseMemObject(used);
  static const struct { const char *key; cl_mem_flags flags; } made[] = {
    {"cl.buffer.copyHostPtr.flags", CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR},
    {"cl.buffer.allocHostPtr.flags", CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR | CL_MEM_COPY_HOST_PTR},
    {"cl.buffer.readOnly.flags", CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR},
  };
  for (size_t i = 0; i < sizeof made / sizeof *made; i++) {
    cl_mem m = clCreateBuffer(ctx, made[i].flags, sizeof host, host, &err);
    clGetMemObjectInfo(m, CL_MEM_FLAGS, sizeof flags, &flags, NULL);
    put_int(made[i].key, (long long)flags);
    clReleaseMemObject(m);
  }

  /* Destructor callbacks: three on one buffer, and NULL. */
  cl_mem buf = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 1024, NULL, &err);
  put_code("cl.setDestructorCallback.null", "clSetMemObjectDestructorCallback", clSetMemObjectDestructorCallback(buf, NULL, NULL));
  clRetainMemObject(buf);
  clGetMemObjectInfo(buf, CL_MEM_REFERENCE_COUNT, sizeof refs, &refs, NULL);
  put_int("cl.buffer.referenceCountAfterRetain", refs);
  clReleaseMemObject(buf);
  for (int i = 1; i <= 3; i++) clSetMemObjectDestructorCallback(buf, on_destroyed, (void *)(intptr_t)i);
  clReleaseMemObject(buf);
  clFinish(queue);
  begin("cl.destructorOrder");
  printf("[");
  for (int i = 0; i < destructor_count; i++) printf(i ? ",%d" : "%d", destructor_order[i]);
  printf("]");
  end();

  /* Reads and writes. */
  cl_mem mem = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64, NULL, &err);
  unsigned char bytes[64] = {0};
  cl_event ev;
  err = clEnqueueWriteBuffer(queue, mem, CL_FALSE, 0, sizeof bytes, bytes, 0, NULL, &ev);
  put_code("cl.write.enqueue", "clEnqueueWriteBuffer", err);
  put_int("cl.write.commandType", event_int(ev, CL_EVENT_COMMAND_TYPE));
  put_code("cl.write.wait", "clWaitForEvents", clWaitForEvents(1, &ev));
  put_int("cl.write.status", event_int(ev, CL_EVENT_COMMAND_EXECUTION_STATUS));
  clReleaseEvent(ev);
  err = clEnqueueReadBuffer(queue, mem, CL_FALSE, 0, sizeof bytes, bytes, 0, NULL, &ev);
  put_code("cl.read.enqueue", "clEnqueueReadBuffer", err);
  put_int("cl.read.commandType", event_int(ev, CL_EVENT_COMMAND_TYPE));
  put_code("cl.read.wait", "clWaitForEvents", clWaitForEvents(1, &ev));
  put_int("cl.read.status", event_int(ev, CL_EVENT_COMMAND_EXECUTION_STATUS));
  clReleaseEvent(ev);
  for (int i = 0; i < 64; i++) bytes[i] = (unsigned char)(i * 3);
  clEnqueueWriteBuffer(queue, mem, CL_TRUE, 0, sizeof bytes, bytes, 0, NULL, NULL);
  unsigned char back[16] = {0};
  clEnqueueReadBuffer(queue, mem, CL_TRUE, 16, sizeof back, back, 0, NULL, NULL);
  begin("cl.read.dataAtOffset16");
  printf("[");
  for (int i = 0; i < 16; i++) printf(i ? ",%d" : "%d", back[i]);
  printf("]");
  end();
  /* Zero bytes from a valid (non-NULL) host pointer: what an empty typed array is in JS. */
  err = clEnqueueWriteBuffer(queue, mem, CL_FALSE, 0, 0, bytes, 0, NULL, &ev);
  put_code("cl.write.size0", "clEnqueueWriteBuffer", err);
  if (err == CL_SUCCESS) clWaitForEvents(1, &ev), clReleaseEvent(ev);
  err = clEnqueueReadBuffer(queue, mem, CL_FALSE, 0, 0, bytes, 0, NULL, &ev);
  put_code("cl.read.size0", "clEnqueueReadBuffer", err);
  if (err == CL_SUCCESS) clWaitForEvents(1, &ev), clReleaseEvent(ev);
  err = clEnqueueReadBuffer(queue, mem, CL_FALSE, 64, 0, bytes, 0, NULL, &ev);
  put_code("cl.read.size0AtEnd", "clEnqueueReadBuffer", err);
  if (err == CL_SUCCESS) clWaitForEvents(1, &ev), clReleaseEvent(ev);
  err = clEnqueueWriteBuffer(queue, mem, CL_FALSE, 32, 64, bytes, 0, NULL, &ev);
  put_code("cl.write.outOfBounds", "clEnqueueWriteBuffer", err);
  err = clEnqueueWriteBuffer(queue, mem, CL_FALSE, 0, 64, bytes, 1, NULL, &ev);
  put_code("cl.write.waitListNull", "clEnqueueWriteBuffer", err);
  cl_event foreign = clCreateUserEvent(other, &err);
  err = clEnqueueWriteBuffer(queue, mem, CL_FALSE, 0, 64, bytes, 1, &foreign, &ev);
  put_code("cl.write.waitListOtherContext", "clEnqueueWriteBuffer", err);
  clSetUserEventStatus(foreign, CL_COMPLETE);
  clReleaseEvent(foreign);
  clGetContextInfo(ctx, CL_CONTEXT_REFERENCE_COUNT, sizeof refs, &refs, NULL);
  put_int("cl.context.referenceCountWithChildren", refs);

  /* User events. */
  cl_event user = clCreateUserEvent(ctx, &err);
  put_int("cl.userEvent.commandType", event_int(user, CL_EVENT_COMMAND_TYPE));
  put_int("cl.userEvent.initialStatus", event_int(user, CL_EVENT_COMMAND_EXECUTION_STATUS));
  put_code("cl.userEvent.setStatus(1)", "clSetUserEventStatus", clSetUserEventStatus(user, 1));
  put_code("cl.userEvent.setStatus(2)", "clSetUserEventStatus", clSetUserEventStatus(user, CL_SUBMITTED));
  cl_event waiting;
  err = clEnqueueWriteBuffer(queue, mem, CL_FALSE, 0, 64, bytes, 1, &user, &waiting);
  put_code("cl.userEvent.dependentWrite.enqueue", "clEnqueueWriteBuffer", err);
  put_code("cl.userEvent.setStatus(-5)", "clSetUserEventStatus", clSetUserEventStatus(user, -5));
  put_int("cl.userEvent.statusAfterFailure", event_int(user, CL_EVENT_COMMAND_EXECUTION_STATUS));
  put_code("cl.userEvent.setStatusAgain", "clSetUserEventStatus", clSetUserEventStatus(user, CL_COMPLETE));
  put_code("cl.userEvent.dependentWrite.wait", "clWaitForEvents", clWaitForEvents(1, &waiting));
  put_int("cl.userEvent.dependentWrite.status", event_int(waiting, CL_EVENT_COMMAND_EXECUTION_STATUS));
  clReleaseEvent(waiting);
  clReleaseEvent(user);
  /* -(2^32) does not fit a cl_int: a C caller gets it truncated to 0, CL_COMPLETE. */
  user = clCreateUserEvent(ctx, &err);
  put_code("cl.userEvent.setStatus(-2^32)", "clSetUserEventStatus", clSetUserEventStatus(user, (cl_int)(int64_t)-4294967296LL));
  put_int("cl.userEvent.setStatus(-2^32).status", event_int(user, CL_EVENT_COMMAND_EXECUTION_STATUS));
  clSetUserEventStatus(user, CL_COMPLETE);
  clReleaseEvent(user);
  clFinish(queue);

  /* A buffer released while an enqueued command still uses it: destroyed once the command ran. */
  cl_event gate = clCreateUserEvent(ctx, &err);
  cl_mem pending = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64, NULL, &err);
  destructor_count = 0;
  for (int i = 1; i <= 2; i++) clSetMemObjectDestructorCallback(pending, on_destroyed, (void *)(intptr_t)i);
  clEnqueueWriteBuffer(queue, pending, CL_FALSE, 0, 64, bytes, 1, &gate, &ev);
  clReleaseMemObject(pending);
  sleep_ms(50);
  int before = __atomic_load_n(&destructor_count, __ATOMIC_SEQ_CST);
  clSetUserEventStatus(gate, CL_COMPLETE);
  clWaitForEvents(1, &ev);
  clFinish(queue);
  int after = await_count(&destructor_count, 2);
  begin("cl.destructor.pendingCommand");
  printf("{\"callsBeforeCommand\":%d,\"callsAfter\":%d,\"order\":[", before, after);
  for (int i = 0; i < after; i++) printf(i ? ",%d" : "%d", destructor_order[i]);
  printf("]}");
  end();
  clReleaseEvent(ev);
  clReleaseEvent(gate);

  clReleaseMemObject(mem);

  /* clSVMAlloc. */
  if (caps & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER) {
    put_svm("cl.svmAlloc.plain", ctx, CL_MEM_READ_WRITE, 4096, 0);
    put_svm("cl.svmAlloc.align4096", ctx, CL_MEM_READ_WRITE, 4096, 4096);
    put_svm("cl.svmAlloc.align3", ctx, CL_MEM_READ_WRITE, 4096, 3);
    put_svm("cl.svmAlloc.size0", ctx, CL_MEM_READ_WRITE, 0, 0);
    put_svm("cl.svmAlloc.overMaxAlloc", ctx, CL_MEM_READ_WRITE, maxalloc + 1, 0);
    put_svm("cl.svmAlloc.fineGrain", ctx, CL_MEM_READ_WRITE | CL_MEM_SVM_FINE_GRAIN_BUFFER, 4096, 0);
    put_svm("cl.svmAlloc.fineGrainAtomics", ctx, CL_MEM_READ_WRITE | CL_MEM_SVM_FINE_GRAIN_BUFFER | CL_MEM_SVM_ATOMICS, 4096, 0);
    put_svm("cl.svmAlloc.atomicsWithoutFineGrain", ctx, CL_MEM_READ_WRITE | CL_MEM_SVM_ATOMICS, 4096, 0);
    /* 2^32 does not fit alignment's cl_uint: a C caller gets 0, the default alignment. */
    put_svm("cl.svmAlloc.align2^32", ctx, CL_MEM_READ_WRITE, 4096, 4294967296ULL);

    /* clEnqueueSVMFree: the callback gets the pointers in the order given. */
    for (int i = 0; i < SVM_N; i++) svm_given[i] = clSVMAlloc(ctx, CL_MEM_READ_WRITE, 256, 0);
    err = clEnqueueSVMFree(queue, SVM_N, svm_given, on_svm_free, ctx, 0, NULL, &ev);
    put_code("cl.svmFree.enqueue", "clEnqueueSVMFree", err);
    put_int("cl.svmFree.commandType", event_int(ev, CL_EVENT_COMMAND_TYPE));
    put_code("cl.svmFree.wait", "clWaitForEvents", clWaitForEvents(1, &ev));
    clFinish(queue);
    put_int("cl.svmFree.status", event_int(ev, CL_EVENT_COMMAND_EXECUTION_STATUS));
    clReleaseEvent(ev);
    begin("cl.svmFree.callback");
    printf("{\"calls\":%d,\"count\":%d,\"order\":[", svm_calls, svm_seen_count);
    for (int i = 0; i < svm_seen_count && i < SVM_N; i++) printf(i ? ",%d" : "%d", svm_seen[i]);
    printf("]}");
    end();
    /* A free that waits for a user event: its callback comes after the event completed. */
    memset(svm_given, 0, sizeof svm_given);
    for (int i = 0; i < 2; i++) svm_given[i] = clSVMAlloc(ctx, CL_MEM_READ_WRITE, 256, 0);
    svm_calls = 0;
    gate = clCreateUserEvent(ctx, &err);
    err = clEnqueueSVMFree(queue, 2, svm_given, on_svm_free, ctx, 1, &gate, &ev);
    put_code("cl.svmFree.waitFor.enqueue", "clEnqueueSVMFree", err);
    sleep_ms(50);
    before = __atomic_load_n(&svm_calls, __ATOMIC_SEQ_CST);
    clSetUserEventStatus(gate, CL_COMPLETE);
    put_code("cl.svmFree.waitFor.wait", "clWaitForEvents", clWaitForEvents(1, &ev));
    begin("cl.svmFree.waitFor.callback");
    printf("{\"callsBeforeEvent\":%d,\"callsAfterWait\":%d,\"order\":[%d,%d]}", before,
           __atomic_load_n(&svm_calls, __ATOMIC_SEQ_CST), svm_seen[0], svm_seen[1]);
    end();
    clFinish(queue);
    clReleaseEvent(ev);
    clReleaseEvent(gate);

    svm_calls = 0;
    svm_seen_count = -1;
    err = clEnqueueSVMFree(queue, 0, NULL, on_svm_free, ctx, 0, NULL, &ev);
    put_code("cl.svmFree.empty.enqueue", "clEnqueueSVMFree", err);
    if (err == CL_SUCCESS) {
      put_code("cl.svmFree.empty.wait", "clWaitForEvents", clWaitForEvents(1, &ev));
      clFinish(queue);
      clReleaseEvent(ev);
      begin("cl.svmFree.empty.callback");
      printf("{\"calls\":%d,\"count\":%d}", svm_calls, svm_seen_count);
      end();
    }
  }
  clReleaseCommandQueue(queue);
  clReleaseContext(other);
  clReleaseContext(ctx);
  free(platforms);
}

/* --- Embree ----------------------------------------------------------------------------------- */

/* Which step of the script is running, for the monitor's log. */
static const char *phase = "";
static char monitor_log[1 << 16];
static size_t monitor_len;
static long long monitor_sum;
/* The monitor refuses the first allocation (bytes > 0, !post) of this phase; NULL: none. */
static const char *refuse_phase;
static int refused;

static bool monitor(void *user, ssize_t bytes, bool post) {
  (void)user;
  int refuse = 0;
  if (bytes > 0 && !post && refuse_phase && !refused && strcmp(phase, refuse_phase) == 0) refuse = refused = 1;
  if (!refuse || post || bytes <= 0) monitor_sum += bytes;
  monitor_len += snprintf(monitor_log + monitor_len, sizeof monitor_log - monitor_len, "%s[\"%s\",%zd,%s]",
                          monitor_len ? "," : "", phase, bytes, post ? "true" : "false");
  return !refuse;
}

/* The first error of the call in progress, like memlife's error function. */
static enum RTCError first_error;
static void on_error(void *user, enum RTCError code, const char *message) {
  (void)user, (void)message;
  if (first_error == RTC_ERROR_NONE) first_error = code;
}

static void put_rtc(const char *key, const char *fn) {
  begin(key);
  if (first_error == RTC_ERROR_NONE) printf("{\"ok\":true}");
  else { printf("{\"code\":%d,\"fn\":", (int)first_error); json_string(fn); printf("}"); }
  end();
  first_error = RTC_ERROR_NONE;
}

static void flush_monitor(const char *key) {
  begin(key);
  printf("{\"calls\":[%s],\"sum\":%lld}", monitor_log, monitor_sum);
  end();
  monitor_len = 0;
  monitor_log[0] = 0;
  monitor_sum = 0;
}

/* An 8x8 grid of quads in the z = 0 plane, two triangles each: the same mesh as probe.ts. */
#define GRID 8
static float grid_vertices[(GRID + 1) * (GRID + 1) * 3];
static unsigned grid_indices[GRID * GRID * 6];
static void make_grid(void) {
  for (int y = 0, v = 0; y <= GRID; y++)
    for (int x = 0; x <= GRID; x++, v++) grid_vertices[3 * v] = x, grid_vertices[3 * v + 1] = y, grid_vertices[3 * v + 2] = 0;
  for (int y = 0, i = 0; y < GRID; y++)
    for (int x = 0; x < GRID; x++) {
      unsigned a = y * (GRID + 1) + x, b = a + 1, c = a + GRID + 1, d = c + 1;
      grid_indices[i++] = a, grid_indices[i++] = b, grid_indices[i++] = c;
      grid_indices[i++] = b, grid_indices[i++] = d, grid_indices[i++] = c;
    }
}

/* What memlife's scene.addTriangleMesh does, call for call; stops at the first error like it. */
static const char *add_mesh(RTCDevice device, RTCScene scene) {
  const char *failed = NULL;
  RTCGeometry g = rtcNewGeometry(device, RTC_GEOMETRY_TYPE_TRIANGLE);
  if (first_error) return "rtcNewGeometry";
  void *vb = rtcSetNewGeometryBuffer(g, RTC_BUFFER_TYPE_VERTEX, 0, RTC_FORMAT_FLOAT3, 12, sizeof grid_vertices / 12);
  if (first_error || !vb) { failed = "rtcSetNewGeometryBuffer"; goto out; }
  memcpy(vb, grid_vertices, sizeof grid_vertices);
  void *ib = rtcSetNewGeometryBuffer(g, RTC_BUFFER_TYPE_INDEX, 0, RTC_FORMAT_UINT3, 12, sizeof grid_indices / 12);
  if (first_error || !ib) { failed = "rtcSetNewGeometryBuffer"; goto out; }
  memcpy(ib, grid_indices, sizeof grid_indices);
  rtcCommitGeometry(g);
  if (first_error) { failed = "rtcCommitGeometry"; goto out; }
  rtcAttachGeometry(scene, g);
  if (first_error) failed = "rtcAttachGeometry";
out: {
    enum RTCError keep = first_error;
    rtcReleaseGeometry(g);
    first_error = keep;
  }
  return failed;
}

/* memlife's intersect1 with tnear 0, time 0, and the ray mask given; "null" for a miss. */
static void put_ray(const char *key, RTCScene scene, float ox, float oy, float oz, float dx, float dy, float dz, float tfar, unsigned mask) {
  struct RTCRayHit rh;
  memset(&rh, 0, sizeof rh);
  rh.ray.org_x = ox, rh.ray.org_y = oy, rh.ray.org_z = oz, rh.ray.tnear = 0;
  rh.ray.dir_x = dx, rh.ray.dir_y = dy, rh.ray.dir_z = dz, rh.ray.time = 0;
  rh.ray.tfar = tfar, rh.ray.mask = mask;
  rh.hit.geomID = RTC_INVALID_GEOMETRY_ID, rh.hit.instID[0] = RTC_INVALID_GEOMETRY_ID;
#if EMBREE_MAJOR == 4
  rtcIntersect1(scene, &rh, NULL);
#else
  struct RTCIntersectContext context;
  rtcInitIntersectContext(&context);
  rtcIntersect1(scene, &context, &rh);
#endif
  begin(key);
  /* %.17g of the float widened to double: JSON.parse gives back exactly memlife's float32 reading. */
  if (rh.hit.geomID == RTC_INVALID_GEOMETRY_ID) printf("null");
  else printf("{\"distance\":%.17g,\"geomID\":%u,\"primID\":%u,\"u\":%.17g,\"v\":%.17g,\"normal\":[%.17g,%.17g,%.17g]}",
              (double)rh.ray.tfar, rh.hit.geomID, rh.hit.primID, (double)rh.hit.u, (double)rh.hit.v,
              (double)rh.hit.Ng_x, (double)rh.hit.Ng_y, (double)rh.hit.Ng_z);
  end();
}

enum release_order { SCENE_FIRST, DEVICE_FIRST, SCENE_RETAINED };

/* One device's life with the monitor set at once (rtcNewDevice's own allocations come before any
   monitor can be set, in C as in memlife): scene, mesh, commit, rays, releases. */
static void monitored_run(const char *prefix, const char *refuse, enum release_order order) {
  char key[96];
  RTCDevice device = rtcNewDevice("threads=1");
  rtcSetDeviceErrorFunction(device, on_error, NULL);
  rtcSetDeviceMemoryMonitorFunction(device, monitor, NULL);
  refuse_phase = refuse;
  refused = 0;
  phase = "newScene";
  RTCScene scene = rtcNewScene(device);
  phase = "addTriangleMesh";
  const char *failed = add_mesh(device, scene);
  snprintf(key, sizeof key, "%s.addTriangleMesh", prefix);
  put_rtc(key, failed ? failed : "rtcAttachGeometry");
  phase = "commit";
  rtcCommitScene(scene);
  snprintf(key, sizeof key, "%s.commit", prefix);
  put_rtc(key, "rtcCommitScene");
  if (!refuse) {
    phase = "intersect1";
    snprintf(key, sizeof key, "%s.ray.hit", prefix);
    put_ray(key, scene, 2.25f, 3.5f, -1, 0, 0, 1, INFINITY, 0xffffffffu);
    snprintf(key, sizeof key, "%s.ray.backface", prefix);
    put_ray(key, scene, 0.7f, 0.2f, 5, 0, 0, -2, INFINITY, 0xffffffffu);
    snprintf(key, sizeof key, "%s.ray.miss", prefix);
    put_ray(key, scene, 20, 20, -1, 0, 0, 1, INFINITY, 0xffffffffu);
    snprintf(key, sizeof key, "%s.ray.tooShort", prefix);
    put_ray(key, scene, 2.25f, 3.5f, -1, 0, 0, 1, 0.5f, 0xffffffffu);
    snprintf(key, sizeof key, "%s.ray.mask0", prefix);
    put_ray(key, scene, 2.25f, 3.5f, -1, 0, 0, 1, INFINITY, 0);
  }
  if (order == DEVICE_FIRST) {
    phase = "releaseDevice";
    rtcReleaseDevice(device);
  }
  if (order == SCENE_RETAINED) {
    /* Only the last release frees anything. */
    rtcRetainScene(scene);
    phase = "releaseRetainedScene";
    rtcReleaseScene(scene);
  }
  phase = "releaseScene";
  rtcReleaseScene(scene);
  if (order != DEVICE_FIRST) {
    phase = "releaseDevice";
    rtcReleaseDevice(device);
  }
  first_error = RTC_ERROR_NONE;
  snprintf(key, sizeof key, "%s.monitor", prefix);
  flush_monitor(key);
  refuse_phase = NULL;
}

static void embree(void) {
  make_grid();
  static const char *configs[] = {"threads=1", "", "threads=abc", "bogus=1", "isa=bogus", "threads=1,verbose=0"};
  for (size_t i = 0; i < sizeof configs / sizeof *configs; i++) {
    char key[96];
    snprintf(key, sizeof key, "rtc.newDevice(\"%s\")", configs[i]);
    RTCDevice d = rtcNewDevice(configs[i]);
    if (d) { begin(key); printf("{\"ok\":true}"); end(); rtcReleaseDevice(d); }
    else { first_error = rtcGetDeviceError(NULL); put_rtc(key, "rtcNewDevice"); }
  }

  RTCDevice device = rtcNewDevice("threads=1");
  rtcSetDeviceErrorFunction(device, on_error, NULL);
  static const int properties[] = {0, 1, 2, 3, 32, 33, 34, 35, 63, 64, 65, 66, 67, 68, 96, 97, 98, 99, 100, 101, 128, 129, 130, 4, 131, 999, -1};
  for (size_t i = 0; i < sizeof properties / sizeof *properties; i++) {
    char key[64];
    snprintf(key, sizeof key, "rtc.getProperty(%d)", properties[i]);
    ssize_t value = rtcGetDeviceProperty(device, (enum RTCDeviceProperty)properties[i]);
    if (first_error) put_rtc(key, "rtcGetDeviceProperty");
    else { begin(key); printf("{\"value\":%zd}", value); end(); }
  }
  /* 2^32 + 1 does not fit the enum's int: a C caller gets property 1, VERSION_MAJOR. */
  ssize_t wrapped = rtcGetDeviceProperty(device, (enum RTCDeviceProperty)(int)(int64_t)4294967297LL);
  if (first_error) put_rtc("rtc.getProperty(2^32+1)", "rtcGetDeviceProperty");
  else { begin("rtc.getProperty(2^32+1)"); printf("{\"value\":%zd}", wrapped); end(); }
  rtcReleaseDevice(device);

  monitored_run("rtc.run", NULL, SCENE_FIRST);
  monitored_run("rtc.refuseMesh", "addTriangleMesh", SCENE_FIRST);
  monitored_run("rtc.refuseCommit", "commit", SCENE_FIRST);
  /* Embree calls the monitor while a scene is released after its device. */
  monitored_run("rtc.deviceFirst", NULL, DEVICE_FIRST);
  monitored_run("rtc.sceneRetained", NULL, SCENE_RETAINED);
}

int main(void) {
  opencl();
  embree();
  return 0;
}
