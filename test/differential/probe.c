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
#if __has_include(<CL/cl_ext.h>)
#include <CL/cl_ext.h>
#endif
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

/* A program, its kernels and the commands that run them: probe.ts's programs, call for call. */
static const char *program_source =
  "// UTF-8 in a comment: \u03c0 \u2248 3.14159, \U0001F600\n"
  "typedef struct { int a; float b; } pair;\n"
  "__kernel __attribute__((reqd_work_group_size(4, 1, 1)))\n"
  "void scale(__global float *x, const float k, __local int *scratch, __constant uint4 *table, pair p) {\n"
  "  size_t i = get_global_id(0);\n"
  "  scratch[get_local_id(0)] = (int)i;\n"
  "  x[i] = x[i] * k + (float)table[0].x + p.b;\n"
  "}\n"
  "__kernel void add(__global const int *a, __global const int *b, __global int *c) {\n"
  "  size_t i = get_global_id(0);\n"
  "  c[i] = a[i] + b[i];\n"
  "}\n";

static char *program_string(cl_program p, cl_program_info param) {
  size_t n = 0;
  clGetProgramInfo(p, param, 0, NULL, &n);
  char *s = calloc(n + 1, 1);
  clGetProgramInfo(p, param, n, s, NULL);
  return s;
}
static char *build_log(cl_program p, cl_device_id d) {
  size_t n = 0;
  clGetProgramBuildInfo(p, d, CL_PROGRAM_BUILD_LOG, 0, NULL, &n);
  char *s = calloc(n + 1, 1);
  clGetProgramBuildInfo(p, d, CL_PROGRAM_BUILD_LOG, n, s, NULL);
  return s;
}
static void put_build_status(const char *key, cl_program p, cl_device_id d) {
  cl_build_status status = 0;
  cl_int err = clGetProgramBuildInfo(p, d, CL_PROGRAM_BUILD_STATUS, sizeof status, &status, NULL);
  if (err != CL_SUCCESS) put_code(key, "clGetProgramBuildInfo", err);
  else put_int(key, status);
}
/* memlife's kernelNames: the ';'-separated list split, [] for "". */
static void put_kernel_names(const char *key, cl_program p) {
  size_t n = 0;
  cl_int err = clGetProgramInfo(p, CL_PROGRAM_KERNEL_NAMES, 0, NULL, &n);
  if (err != CL_SUCCESS) return put_code(key, "clGetProgramInfo", err);
  char *s = program_string(p, CL_PROGRAM_KERNEL_NAMES);
  begin(key);
  printf("[");
  if (*s) {
    char *save = NULL;
    int first = 1;
    for (char *w = s;; first = 0) {
      char *semi = strchr(w, ';');
      if (semi) *semi = 0;
      if (!first) printf(",");
      json_string(w);
      if (!semi) break;
      w = semi + 1;
    }
    (void)save;
  }
  printf("]");
  end();
  free(s);
}
static void put_num_kernels(const char *key, cl_program p) {
  size_t n = 0;
  cl_int err = clGetProgramInfo(p, CL_PROGRAM_NUM_KERNELS, sizeof n, &n, NULL);
  if (err != CL_SUCCESS) put_code(key, "clGetProgramInfo", err);
  else put_int(key, (long long)n);
}
/* memlife's argInfo(i): name, type name and address space. */
static void put_arg_info(const char *key, cl_kernel k, cl_uint i) {
  char name[256] = "", type[256] = "";
  cl_kernel_arg_address_qualifier address = 0;
  cl_int err = clGetKernelArgInfo(k, i, CL_KERNEL_ARG_NAME, sizeof name, name, NULL);
  if (err == CL_SUCCESS) err = clGetKernelArgInfo(k, i, CL_KERNEL_ARG_TYPE_NAME, sizeof type, type, NULL);
  if (err == CL_SUCCESS) err = clGetKernelArgInfo(k, i, CL_KERNEL_ARG_ADDRESS_QUALIFIER, sizeof address, &address, NULL);
  if (err != CL_SUCCESS) return put_code(key, "clGetKernelArgInfo", err);
  const char *space = address == CL_KERNEL_ARG_ADDRESS_GLOBAL ? "global"
                    : address == CL_KERNEL_ARG_ADDRESS_LOCAL ? "local"
                    : address == CL_KERNEL_ARG_ADDRESS_CONSTANT ? "constant"
                    : address == CL_KERNEL_ARG_ADDRESS_PRIVATE ? "private" : "(other)";
  begin(key);
  printf("{\"name\":"); json_string(name); printf(",\"typeName\":"); json_string(type);
  printf(",\"addressSpace\":"); json_string(space); printf("}");
  end();
}
static void put_work_group(const char *prefix, cl_kernel k, cl_device_id d) {
  char key[96];
  size_t wg = 0, multiple = 0, compile[3] = {0};
  cl_ulong local = 0;
  clGetKernelWorkGroupInfo(k, d, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
  clGetKernelWorkGroupInfo(k, d, CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE, sizeof multiple, &multiple, NULL);
  clGetKernelWorkGroupInfo(k, d, CL_KERNEL_LOCAL_MEM_SIZE, sizeof local, &local, NULL);
  clGetKernelWorkGroupInfo(k, d, CL_KERNEL_COMPILE_WORK_GROUP_SIZE, sizeof compile, compile, NULL);
  snprintf(key, sizeof key, "%s.workGroupSize", prefix); put_int(key, (long long)wg);
  snprintf(key, sizeof key, "%s.preferredWorkGroupSizeMultiple", prefix); put_int(key, (long long)multiple);
  snprintf(key, sizeof key, "%s.localMemSize", prefix); put_int(key, (long long)local);
  snprintf(key, sizeof key, "%s.compileWorkGroupSize", prefix);
  begin(key); printf("[%zu,%zu,%zu]", compile[0], compile[1], compile[2]); end();
}
/* An enqueue's code, then its event's command type and status after the wait. */
static void put_command(const char *prefix, const char *fn, cl_int err, cl_event ev) {
  char key[96];
  snprintf(key, sizeof key, "%s.enqueue", prefix);
  put_code(key, fn, err);
  if (err != CL_SUCCESS) return;
  snprintf(key, sizeof key, "%s.commandType", prefix);
  put_int(key, event_int(ev, CL_EVENT_COMMAND_TYPE));
  snprintf(key, sizeof key, "%s.wait", prefix);
  put_code(key, "clWaitForEvents", clWaitForEvents(1, &ev));
  snprintf(key, sizeof key, "%s.status", prefix);
  put_int(key, event_int(ev, CL_EVENT_COMMAND_EXECUTION_STATUS));
  clReleaseEvent(ev);
}
static void put_ints(const char *key, const cl_int *v, int n) {
  begin(key);
  printf("[");
  for (int i = 0; i < n; i++) printf(i ? ",%d" : "%d", v[i]);
  printf("]");
  end();
}

/* Kernels that store their by-value argument: the bytes clSetKernelArg got, as the kernel saw them. */
static const char *echo_source =
  "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"
  "#define E(T) __kernel void echo_##T(__global T *o, T v) { o[0] = v; }\n"
  "E(char) E(uchar) E(short) E(ushort) E(int) E(uint) E(long) E(ulong) E(float) E(double)\n"
  "E(int3) E(float3) E(char16) E(long2) E(ushort8) E(double4)\n";

static void put_echo(cl_context ctx, cl_command_queue queue, cl_program program, const char *type, const void *value,
                     size_t size) {
  char name[64], key[96];
  cl_int err;
  unsigned char out[128];
  memset(out, 0xaa, sizeof out);
  snprintf(name, sizeof name, "echo_%s", type);
  snprintf(key, sizeof key, "cl.values.%s", type);
  cl_kernel k = clCreateKernel(program, name, &err);
  cl_mem o = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof out, out, &err);
  clSetKernelArg(k, 0, sizeof o, &o);
  err = clSetKernelArg(k, 1, size, value);
  if (err != CL_SUCCESS) put_code(key, "clSetKernelArg", err);
  else {
    size_t one = 1;
    clEnqueueNDRangeKernel(queue, k, 1, NULL, &one, NULL, 0, NULL, NULL);
    clEnqueueReadBuffer(queue, o, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL);
    size_t n = sizeof out;
    while (n > 0 && out[n - 1] == 0xaa) n--;
    begin(key);
    printf("[");
    for (size_t i = 0; i < n; i++) printf(i ? ",%u" : "%u", out[i]);
    printf("]");
    end();
  }
  clReleaseMemObject(o);
  clReleaseKernel(k);
}

static void values(cl_context ctx, cl_command_queue queue, cl_device_id device) {
  cl_int err;
  size_t length = strlen(echo_source);
  cl_program program = clCreateProgramWithSource(ctx, 1, &echo_source, &length, &err);
  err = clBuildProgram(program, 1, &device, "-cl-kernel-arg-info", NULL, NULL);
  put_code("cl.values.build", "clBuildProgram", err);
  if (err != CL_SUCCESS) return (void)clReleaseProgram(program);
  cl_char c = -128; put_echo(ctx, queue, program, "char", &c, sizeof c);
  cl_uchar uc = 255; put_echo(ctx, queue, program, "uchar", &uc, sizeof uc);
  cl_short sh = -32768; put_echo(ctx, queue, program, "short", &sh, sizeof sh);
  cl_ushort us = 65535; put_echo(ctx, queue, program, "ushort", &us, sizeof us);
  cl_int i = INT32_MIN; put_echo(ctx, queue, program, "int", &i, sizeof i);
  cl_uint ui = UINT32_MAX; put_echo(ctx, queue, program, "uint", &ui, sizeof ui);
  cl_long l = INT64_MIN; put_echo(ctx, queue, program, "long", &l, sizeof l);
  cl_ulong ul = UINT64_MAX; put_echo(ctx, queue, program, "ulong", &ul, sizeof ul);
  cl_float f = -3.4028234663852886e38f; put_echo(ctx, queue, program, "float", &f, sizeof f);
  cl_double d = 1.0 / 3; put_echo(ctx, queue, program, "double", &d, sizeof d);
  cl_int3 i3 = {{1, -2, 3}}; put_echo(ctx, queue, program, "int3", &i3, sizeof i3);
  cl_float3 f3 = {{1.5f, -2.5f, 0.1f}}; put_echo(ctx, queue, program, "float3", &f3, sizeof f3);
  cl_char16 c16;
  for (int j = 0; j < 16; j++) c16.s[j] = (cl_char)(j * 17 - 128);
  put_echo(ctx, queue, program, "char16", &c16, sizeof c16);
  cl_long2 l2 = {{9007199254740993LL, -1}}; put_echo(ctx, queue, program, "long2", &l2, sizeof l2);
  cl_ushort8 u8;
  for (int j = 0; j < 8; j++) u8.s[j] = (cl_ushort)(j * 9000);
  put_echo(ctx, queue, program, "ushort8", &u8, sizeof u8);
  cl_double4 d4 = {{0.1, -0.0, 1e300, 5e-324}}; put_echo(ctx, queue, program, "double4", &d4, sizeof d4);
  clReleaseProgram(program);
}

static void programs(cl_context ctx, cl_command_queue queue, cl_device_id device, cl_device_svm_capabilities caps) {
  cl_int err;
  char *s;
  cl_ulong local_mem = 0;
  clGetDeviceInfo(device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local_mem, &local_mem, NULL);
  put_int("cl.device.localMemSize", (long long)local_mem);

  size_t length = strlen(program_source);
  cl_program program = clCreateProgramWithSource(ctx, 1, &program_source, &length, &err);
  put_code("cl.program.create", "clCreateProgramWithSource", err);
  put_string("cl.program.source", s = program_string(program, CL_PROGRAM_SOURCE)); free(s);
  put_build_status("cl.program.buildStatusBefore", program, device);
  put_kernel_names("cl.program.kernelNamesBeforeBuild", program);
  put_num_kernels("cl.program.numKernelsBeforeBuild", program);
  clCreateKernel(program, "add", &err);
  put_code("cl.program.createKernelBeforeBuild", "clCreateKernel", err);
  /* memlife adds -cl-kernel-arg-info to every build, for setArg's checks. */
  put_code("cl.program.build", "clBuildProgram", clBuildProgram(program, 0, NULL, "-cl-kernel-arg-info", NULL, NULL));
  put_build_status("cl.program.buildStatus", program, device);
  put_string("cl.program.buildLog", s = build_log(program, device)); free(s);
  put_kernel_names("cl.program.kernelNames", program);
  put_num_kernels("cl.program.numKernels", program);
  clCreateKernel(program, "nope", &err);
  put_code("cl.program.createKernel(nope)", "clCreateKernel", err);

  cl_kernel scale = clCreateKernel(program, "scale", &err);
  cl_kernel add = clCreateKernel(program, "add", &err);
  static const struct { const char *name; cl_kernel *k; } kernels[] = {{"scale", NULL}, {"add", NULL}};
  (void)kernels;
  cl_kernel both[2] = {scale, add};
  const char *names[2] = {"scale", "add"};
  for (int j = 0; j < 2; j++) {
    char key[96], fname[64] = "";
    cl_uint nargs = 0;
    clGetKernelInfo(both[j], CL_KERNEL_FUNCTION_NAME, sizeof fname, fname, NULL);
    clGetKernelInfo(both[j], CL_KERNEL_NUM_ARGS, sizeof nargs, &nargs, NULL);
    snprintf(key, sizeof key, "cl.kernel.%s.name", names[j]); put_string(key, fname);
    snprintf(key, sizeof key, "cl.kernel.%s.numArgs", names[j]); put_int(key, nargs);
    for (cl_uint i = 0; i < nargs; i++) {
      snprintf(key, sizeof key, "cl.kernel.%s.argInfo(%u)", names[j], i);
      put_arg_info(key, both[j], i);
    }
    snprintf(key, sizeof key, "cl.kernel.%s", names[j]);
    put_work_group(key, both[j], device);
  }
  /* OpenCL rebuilds no program with kernels attached. */
  put_code("cl.program.rebuildWithKernels", "clBuildProgram", clBuildProgram(program, 0, NULL, "-cl-kernel-arg-info", NULL, NULL));
  put_build_status("cl.program.buildStatusAfterRefusedRebuild", program, device);
  /* clCreateKernelsInProgram: the names, in the order the driver gives them. */
  cl_uint nk = 0;
  clCreateKernelsInProgram(program, 0, NULL, &nk);
  cl_kernel *all = calloc(nk, sizeof *all);
  clCreateKernelsInProgram(program, nk, all, NULL);
  begin("cl.program.createKernels");
  printf("[");
  for (cl_uint i = 0; i < nk; i++) {
    char fname[64] = "";
    clGetKernelInfo(all[i], CL_KERNEL_FUNCTION_NAME, sizeof fname, fname, NULL);
    if (i) printf(",");
    json_string(fname);
    clReleaseKernel(all[i]);
  }
  printf("]");
  end();
  free(all);

  /* Running add: c = a + b over 16 ints. */
  cl_int a[16], b[16], c[16] = {0};
  for (int i = 0; i < 16; i++) a[i] = i, b[i] = 100 * i;
  cl_mem ma = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof a, a, &err);
  cl_mem mb = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof b, b, &err);
  cl_mem mc = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof c, NULL, &err);
  size_t sz = 0;
  clGetMemObjectInfo(mc, CL_MEM_SIZE, sizeof sz, &sz, NULL);
  put_int("cl.buffer.plain.size", (long long)sz);
  cl_mem_flags flags = 0;
  clGetMemObjectInfo(mc, CL_MEM_FLAGS, sizeof flags, &flags, NULL);
  put_int("cl.buffer.plain.flags", (long long)flags);
  cl_event ev = NULL;
  size_t global = 16, local4 = 4, local8 = 8;
  /* Arguments not set yet. */
  err = clEnqueueNDRangeKernel(queue, add, 1, NULL, &global, NULL, 0, NULL, &ev);
  put_code("cl.ndrange.argsNotSet", "clEnqueueNDRangeKernel", err);
  if (err == CL_SUCCESS) clWaitForEvents(1, &ev), clReleaseEvent(ev);
  clSetKernelArg(add, 0, sizeof ma, &ma);
  clSetKernelArg(add, 1, sizeof mb, &mb);
  clSetKernelArg(add, 2, sizeof mc, &mc);
  ev = NULL;
  err = clEnqueueNDRangeKernel(queue, add, 1, NULL, &global, NULL, 0, NULL, &ev);
  put_command("cl.ndrange.add", "clEnqueueNDRangeKernel", err, ev);
  clEnqueueReadBuffer(queue, mc, CL_TRUE, 0, sizeof c, c, 0, NULL, NULL);
  put_ints("cl.ndrange.add.result", c, 16);
  size_t offset = 4, global8 = 8;
  ev = NULL;
  for (int i = 0; i < 16; i++) c[i] = -1;
  clEnqueueWriteBuffer(queue, mc, CL_TRUE, 0, sizeof c, c, 0, NULL, NULL);
  err = clEnqueueNDRangeKernel(queue, add, 1, &offset, &global8, &local4, 0, NULL, &ev);
  put_command("cl.ndrange.addOffset", "clEnqueueNDRangeKernel", err, ev);
  clEnqueueReadBuffer(queue, mc, CL_TRUE, 0, sizeof c, c, 0, NULL, NULL);
  put_ints("cl.ndrange.addOffset.result", c, 16);
  /* The required work-group size is 4: 8 is refused. */
  cl_mem mx = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 16 * sizeof(float), NULL, &err);
  cl_uint table[4] = {1, 2, 3, 4};
  cl_mem mt = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof table, table, &err);
  float k = 2;
  struct { cl_int a; cl_float b; } pair = {7, 0.5f};
  clSetKernelArg(scale, 0, sizeof mx, &mx);
  clSetKernelArg(scale, 1, sizeof k, &k);
  clSetKernelArg(scale, 2, 4 * sizeof(cl_int), NULL);
  clSetKernelArg(scale, 3, sizeof mt, &mt);
  clSetKernelArg(scale, 4, sizeof pair, &pair);
  ev = NULL;
  err = clEnqueueNDRangeKernel(queue, scale, 1, NULL, &global, &local8, 0, NULL, &ev);
  put_code("cl.ndrange.wrongLocal", "clEnqueueNDRangeKernel", err);
  if (err == CL_SUCCESS) clWaitForEvents(1, &ev), clReleaseEvent(ev);
  float x[16];
  for (int i = 0; i < 16; i++) x[i] = (float)i;
  clEnqueueWriteBuffer(queue, mx, CL_TRUE, 0, sizeof x, x, 0, NULL, NULL);
  ev = NULL;
  err = clEnqueueNDRangeKernel(queue, scale, 1, NULL, &global, &local4, 0, NULL, &ev);
  put_command("cl.ndrange.scale", "clEnqueueNDRangeKernel", err, ev);
  clEnqueueReadBuffer(queue, mx, CL_TRUE, 0, sizeof x, x, 0, NULL, NULL);
  begin("cl.ndrange.scale.result");
  printf("[");
  for (int i = 0; i < 16; i++) printf(i ? ",%.17g" : "%.17g", (double)x[i]);
  printf("]");
  end();
  put_work_group("cl.kernel.scaleAfterArgs", scale, device);

  /* Copies, fills, markers and barriers. */
  ev = NULL;
  err = clEnqueueCopyBuffer(queue, ma, mc, 0, 0, sizeof a, 0, NULL, &ev);
  put_command("cl.copy", "clEnqueueCopyBuffer", err, ev);
  ev = NULL;
  err = clEnqueueCopyBuffer(queue, mc, mc, 0, 8, 16, 0, NULL, &ev);
  put_code("cl.copy.overlap", "clEnqueueCopyBuffer", err);
  if (err == CL_SUCCESS) clWaitForEvents(1, &ev), clReleaseEvent(ev);
  ev = NULL;
  err = clEnqueueCopyBuffer(queue, mc, mc, 0, 32, 32, 0, NULL, &ev);
  put_command("cl.copy.sameBufferApart", "clEnqueueCopyBuffer", err, ev);
  clEnqueueReadBuffer(queue, mc, CL_TRUE, 0, sizeof c, c, 0, NULL, NULL);
  put_ints("cl.copy.result", c, 16);
  cl_int pattern = 0x01020304;
  ev = NULL;
  err = clEnqueueFillBuffer(queue, mc, &pattern, sizeof pattern, 8, 16, 0, NULL, &ev);
  put_command("cl.fill", "clEnqueueFillBuffer", err, ev);
  clEnqueueReadBuffer(queue, mc, CL_TRUE, 0, sizeof c, c, 0, NULL, NULL);
  put_ints("cl.fill.result", c, 16);
  ev = NULL;
  err = clEnqueueMarkerWithWaitList(queue, 0, NULL, &ev);
  put_command("cl.marker", "clEnqueueMarkerWithWaitList", err, ev);
  ev = NULL;
  err = clEnqueueBarrierWithWaitList(queue, 0, NULL, &ev);
  put_command("cl.barrier", "clEnqueueBarrierWithWaitList", err, ev);

  if (caps & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER) {
    cl_int *svm = clSVMAlloc(ctx, CL_MEM_READ_WRITE, 64, 0);
    ev = NULL;
    err = clEnqueueSVMMemFill(queue, svm, &pattern, sizeof pattern, 64, 0, NULL, &ev);
    put_command("cl.svmMemFill", "clEnqueueSVMMemFill", err, ev);
    ev = NULL;
    err = clEnqueueSVMMemcpy(queue, CL_FALSE, svm, a, 32, 0, NULL, &ev);
    put_command("cl.svmMemcpy", "clEnqueueSVMMemcpy", err, ev);
    ev = NULL;
    err = clEnqueueSVMMap(queue, CL_FALSE, CL_MAP_READ | CL_MAP_WRITE, svm, 64, 0, NULL, &ev);
    put_command("cl.svmMap", "clEnqueueSVMMap", err, ev);
    put_ints("cl.svmMap.contents", svm, 16);
    ev = NULL;
    err = clEnqueueSVMUnmap(queue, svm, 0, NULL, &ev);
    put_command("cl.svmUnmap", "clEnqueueSVMUnmap", err, ev);
    clFinish(queue);
    clSVMFree(ctx, svm);
  }

  /* Builds that fail. */
  const char *broken = "__kernel void broken(__global int *x) { x[0] = undeclared; }\n";
  length = strlen(broken);
  cl_program bad = clCreateProgramWithSource(ctx, 1, &broken, &length, &err);
  put_code("cl.program.broken.build", "clBuildProgram", clBuildProgram(bad, 0, NULL, "-cl-kernel-arg-info", NULL, NULL));
  put_build_status("cl.program.broken.buildStatus", bad, device);
  s = build_log(bad, device);
  begin("cl.program.broken.buildLogMentions");
  printf(strstr(s, "undeclared") ? "true" : "false");
  end();
  /* The whole log, but for the name of PoCL's temporary file, new in each build. */
  for (char *t = strstr(s, "tempfile_"); t; t = strstr(t + 10, "tempfile_")) {
    char *e = t + 9;
    while ((*e >= 'A' && *e <= 'Z') || (*e >= 'a' && *e <= 'z') || (*e >= '0' && *e <= '9')) e++;
    t[9] = '*';
    memmove(t + 10, e, strlen(e) + 1);
  }
  put_string("cl.program.broken.buildLog", s);
  free(s);
  put_kernel_names("cl.program.broken.kernelNames", bad);
  put_code("cl.program.broken.createKernels", "clCreateKernelsInProgram", clCreateKernelsInProgram(bad, 0, NULL, NULL));
  clReleaseProgram(bad);
  length = strlen(program_source);
  bad = clCreateProgramWithSource(ctx, 1, &program_source, &length, &err);
  put_code("cl.program.badOptions.build", "clBuildProgram", clBuildProgram(bad, 0, NULL, "-cl-std=CL9.9 -cl-kernel-arg-info", NULL, NULL));
  put_build_status("cl.program.badOptions.buildStatus", bad, device);
  clReleaseProgram(bad);

  /* A command behind a user event: its status before and after, a marker and a copy behind it. */
  cl_event gate = clCreateUserEvent(ctx, &err);
  cl_event gated, marker;
  clEnqueueWriteBuffer(queue, mc, CL_FALSE, 0, sizeof a, a, 1, &gate, &gated);
  put_int("cl.gated.write.statusBefore", event_int(gated, CL_EVENT_COMMAND_EXECUTION_STATUS));
  clFlush(queue);
  put_int("cl.gated.write.statusAfterFlush", event_int(gated, CL_EVENT_COMMAND_EXECUTION_STATUS));
  clEnqueueMarkerWithWaitList(queue, 1, &gated, &marker);
  put_int("cl.gated.marker.statusBefore", event_int(marker, CL_EVENT_COMMAND_EXECUTION_STATUS));
  clSetUserEventStatus(gate, CL_COMPLETE);
  put_code("cl.gated.marker.wait", "clWaitForEvents", clWaitForEvents(1, &marker));
  put_int("cl.gated.write.status", event_int(gated, CL_EVENT_COMMAND_EXECUTION_STATUS));
  put_int("cl.gated.marker.status", event_int(marker, CL_EVENT_COMMAND_EXECUTION_STATUS));
  clReleaseEvent(marker);
  clReleaseEvent(gated);
  clReleaseEvent(gate);
  /* One device given twice: OpenCL counts it once. */
  cl_device_id twice[2] = {device, device};
  cl_context dup = clCreateContext(NULL, 2, twice, NULL, NULL, &err);
  cl_uint ndev = 0;
  clGetContextInfo(dup, CL_CONTEXT_NUM_DEVICES, sizeof ndev, &ndev, NULL);
  put_int("cl.context.deviceGivenTwice.devices", ndev);
  clReleaseContext(dup);

  clReleaseMemObject(ma);
  clReleaseMemObject(mb);
  clReleaseMemObject(mc);
  clReleaseMemObject(mx);
  clReleaseMemObject(mt);
  clReleaseKernel(scale);
  clReleaseKernel(add);
  clReleaseProgram(program);
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
    {"2^32|CPU", 0x100000000ULL | CL_DEVICE_TYPE_CPU}, {"2^40", 0x10000000000ULL},
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
  /* PoCL calls them inside the release; a GPU driver (and test/native/thread-driver.c) later. */
  int destroyed = await_count(&destructor_count, 3);
  begin("cl.destructorOrder");
  printf("[");
  for (int i = 0; i < destroyed; i++) printf(i ? ",%d" : "%d", destructor_order[i]);
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
  put_code("cl.userEvent.waitFailed", "clWaitForEvents", clWaitForEvents(1, &user));
  put_code("cl.userEvent.finishAfterFailure", "clFinish", clFinish(queue));
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
  programs(ctx, queue, device, caps);
  values(ctx, queue, device);
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
static long long monitor_sum, monitor_peak;
static int monitor_calls, monitor_denied;
/* The monitor refuses the first allocation (bytes > 0, !post) of this phase; NULL: none. */
static const char *refuse_phase;
static int refused;

static long long budget = -1;
static bool monitor(void *user, ssize_t bytes, bool post) {
  (void)user;
  int refuse = 0;
  if (bytes > 0 && !post && refuse_phase && !refused && strcmp(phase, refuse_phase) == 0) refuse = refused = 1;
  /* memlife's setMemoryBudget: an allocation that would take the live bytes over it is refused. */
  if (bytes > 0 && !post && budget >= 0 && monitor_sum + bytes > budget) refuse = 1;
  if (!refuse || post || bytes <= 0) monitor_sum += bytes;
  if (monitor_sum > monitor_peak) monitor_peak = monitor_sum;
  monitor_calls++;
  monitor_denied += refuse;
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
  /* What memlife's device.memory says of the same calls: every call since the monitor was set,
     refused pre-allocations left out of the bytes. */
  char memory_key[96];
  snprintf(memory_key, sizeof memory_key, "%.*s.memory", (int)(strlen(key) - strlen(".monitor")), key);
  begin(memory_key);
  printf("{\"accounting\":true,\"bytes\":%lld,\"peak\":%lld,\"calls\":%d,\"denied\":%d}", monitor_sum, monitor_peak,
         monitor_calls, monitor_denied);
  end();
  monitor_peak = 0;
  monitor_calls = 0;
  monitor_denied = 0;
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

/* memlife's intersect1 with every field given; "null" for a miss. */
static void put_ray_segment(const char *key, RTCScene scene, float ox, float oy, float oz, float dx, float dy, float dz,
                            float tnear, float tfar, float time, unsigned mask) {
  struct RTCRayHit rh;
  memset(&rh, 0, sizeof rh);
  rh.ray.org_x = ox, rh.ray.org_y = oy, rh.ray.org_z = oz, rh.ray.tnear = tnear;
  rh.ray.dir_x = dx, rh.ray.dir_y = dy, rh.ray.dir_z = dz, rh.ray.time = time;
  rh.ray.tfar = tfar, rh.ray.mask = mask;
  rh.hit.geomID = RTC_INVALID_GEOMETRY_ID, rh.hit.instID[0] = RTC_INVALID_GEOMETRY_ID;
#if EMBREE_MAJOR == 4
  rtcIntersect1(scene, &rh, NULL);
#else
  struct RTCIntersectContext context;
  rtcInitIntersectContext(&context);
  rtcIntersect1(scene, &context, &rh);
#endif
  if (first_error) return put_rtc(key, "rtcIntersect1");
  begin(key);
  /* %.17g of the float widened to double: JSON.parse gives back exactly memlife's float32 reading. */
  if (rh.hit.geomID == RTC_INVALID_GEOMETRY_ID) printf("null");
  else printf("{\"distance\":%.17g,\"geomID\":%u,\"primID\":%u,\"u\":%.17g,\"v\":%.17g,\"normal\":[%.17g,%.17g,%.17g]}",
              (double)rh.ray.tfar, rh.hit.geomID, rh.hit.primID, (double)rh.hit.u, (double)rh.hit.v,
              (double)rh.hit.Ng_x, (double)rh.hit.Ng_y, (double)rh.hit.Ng_z);
  end();
}

/* memlife's intersect1 with tnear 0, time 0, and the ray mask given. */
static void put_ray(const char *key, RTCScene scene, float ox, float oy, float oz, float dx, float dy, float dz, float tfar, unsigned mask) {
  put_ray_segment(key, scene, ox, oy, oz, dx, dy, dz, 0, tfar, 0, mask);
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
  if (refuse && strcmp(refuse, "commit") == 0) {
    phase = "intersect1";
    snprintf(key, sizeof key, "%s.afterFailedCommit", prefix);
    put_ray(key, scene, 2.25f, 3.5f, -1, 0, 0, 1, INFINITY, 0xffffffffu);
  }
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

/* No monitor: two meshes in one scene (the second, one triangle at z = 2, facing the other way),
   and rays that hit each triangle of a quad, edges, vertices, with tnear, time and scaled directions. */
static void scenes(void) {
  RTCDevice device = rtcNewDevice("threads=1");
  rtcSetDeviceErrorFunction(device, on_error, NULL);
  RTCScene empty = rtcNewScene(device);
  rtcCommitScene(empty);
  put_rtc("rtc.scenes.empty.commit", "rtcCommitScene");
  put_ray("rtc.scenes.empty.ray", empty, 1, 1, -1, 0, 0, 1, INFINITY, 0xffffffffu);
  rtcReleaseScene(empty);

  RTCScene scene = rtcNewScene(device);
  add_mesh(device, scene);
  put_rtc("rtc.scenes.first", "rtcAttachGeometry");
  static float tri[9] = {0, 0, 2, 0, 4, 2, 4, 0, 2};
  static unsigned tri_index[3] = {0, 1, 2};
  RTCGeometry g = rtcNewGeometry(device, RTC_GEOMETRY_TYPE_TRIANGLE);
  memcpy(rtcSetNewGeometryBuffer(g, RTC_BUFFER_TYPE_VERTEX, 0, RTC_FORMAT_FLOAT3, 12, 3), tri, sizeof tri);
  memcpy(rtcSetNewGeometryBuffer(g, RTC_BUFFER_TYPE_INDEX, 0, RTC_FORMAT_UINT3, 12, 1), tri_index, sizeof tri_index);
  rtcCommitGeometry(g);
  unsigned id = rtcAttachGeometry(scene, g);
  rtcReleaseGeometry(g);
  begin("rtc.scenes.secondGeomID"); printf("%u", id); end();
  first_error = RTC_ERROR_NONE;
  /* Triangles Embree leaves out of the build: a NaN vertex, an infinite one, a degenerate one. */
  static float odd[] = {20, 0, 0, 21, 0, 0, 20, 1, 0, 22, 0, 0, NAN, 0, 0, 22, 1, 0,
                        24, 0, 0, INFINITY, 0, 0, 24, 1, 0, 26, 0, 0, 27, 0, 0, 28, 0, 0};
  static unsigned odd_index[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  g = rtcNewGeometry(device, RTC_GEOMETRY_TYPE_TRIANGLE);
  memcpy(rtcSetNewGeometryBuffer(g, RTC_BUFFER_TYPE_VERTEX, 0, RTC_FORMAT_FLOAT3, 12, 12), odd, sizeof odd);
  memcpy(rtcSetNewGeometryBuffer(g, RTC_BUFFER_TYPE_INDEX, 0, RTC_FORMAT_UINT3, 12, 4), odd_index, sizeof odd_index);
  rtcCommitGeometry(g);
  id = rtcAttachGeometry(scene, g);
  rtcReleaseGeometry(g);
  if (first_error) put_rtc("rtc.scenes.oddGeomID", "rtcAttachGeometry");
  else { begin("rtc.scenes.oddGeomID"); printf("%u", id); end(); }
  first_error = RTC_ERROR_NONE;
  rtcCommitScene(scene);
  put_rtc("rtc.scenes.commit", "rtcCommitScene");
  static const struct { const char *key; float o[3], d[3], tnear, tfar, time; unsigned mask; } rays[] = {
    {"rtc.scenes.ray.fromAbove", {1, 1, 5}, {0, 0, -1}, 0, INFINITY, 0, 0xffffffffu},
    {"rtc.scenes.ray.fromBelow", {1, 1, -1}, {0, 0, 1}, 0, INFINITY, 0, 0xffffffffu},
    {"rtc.scenes.ray.pastFirst", {1, 1, -1}, {0, 0, 1}, 1.5f, INFINITY, 0, 0xffffffffu},
    {"rtc.scenes.ray.secondOnly", {6, 0.5f, 5}, {0, 0, -1}, 0, INFINITY, 0, 0xffffffffu},
    {"rtc.scenes.ray.quadFirst", {5.2f, 6.3f, -1}, {0, 0, 1}, 0, INFINITY, 0, 0xffffffffu},
    {"rtc.scenes.ray.quadSecond", {5.8f, 6.7f, -1}, {0, 0, 1}, 0, INFINITY, 0, 0xffffffffu},
    {"rtc.scenes.ray.diagonal", {5.5f, 6.5f, -1}, {0, 0, 1}, 0, INFINITY, 0, 0xffffffffu},
    {"rtc.scenes.ray.vertex", {3, 3, -1}, {0, 0, 1}, 0, INFINITY, 0, 0xffffffffu},
    {"rtc.scenes.ray.corner", {0, 0, -1}, {0, 0, 1}, 0, INFINITY, 0, 0xffffffffu},
    {"rtc.scenes.ray.farCorner", {8, 8, -1}, {0, 0, 1}, 0, INFINITY, 0, 0xffffffffu},
    {"rtc.scenes.ray.oblique", {1, 1, -2}, {0.5f, 0.25f, 1}, 0, INFINITY, 0, 0xffffffffu},
    {"rtc.scenes.ray.scaled", {7.1f, 2.9f, -1}, {0, 0, 4}, 0, INFINITY, 0, 0xffffffffu},
    {"rtc.scenes.ray.tnearBefore", {7.1f, 2.9f, -1}, {0, 0, 1}, 0.5f, INFINITY, 0, 0xffffffffu},
    {"rtc.scenes.ray.tnearAtHit", {7.1f, 2.9f, -1}, {0, 0, 1}, 1, INFINITY, 0, 0xffffffffu},
    {"rtc.scenes.ray.tfarAtHit", {7.1f, 2.9f, -1}, {0, 0, 1}, 0, 1, 0, 0xffffffffu},
    {"rtc.scenes.ray.negativeTfar", {7.1f, 2.9f, -1}, {0, 0, 1}, 0, -1, 0, 0xffffffffu},
    {"rtc.scenes.ray.time1", {7.1f, 2.9f, -1}, {0, 0, 1}, 0, INFINITY, 1, 0xffffffffu},
    {"rtc.scenes.ray.mask1", {7.1f, 2.9f, -1}, {0, 0, 1}, 0, INFINITY, 0, 1},
    {"rtc.scenes.ray.parallel", {1, 1, 0}, {1, 0, 0}, 0, INFINITY, 0, 0xffffffffu},
    {"rtc.scenes.ray.grazing", {-1, 4.5f, 1}, {1, 0, -0.125f}, 0, INFINITY, 0, 0xffffffffu},
    {"rtc.scenes.ray.outside", {8.5f, 4, -1}, {0, 0, 1}, 0, INFINITY, 0, 0xffffffffu},
    {"rtc.scenes.ray.zeroDirection", {1, 1, -1}, {0, 0, 0}, 0, INFINITY, 0, 0xffffffffu},
    {"rtc.scenes.ray.goodOfOdd", {20.2f, 0.2f, -1}, {0, 0, 1}, 0, INFINITY, 0, 0xffffffffu},
    {"rtc.scenes.ray.nanVertex", {22.1f, 0.2f, -1}, {0, 0, 1}, 0, INFINITY, 0, 0xffffffffu},
    {"rtc.scenes.ray.infiniteVertex", {24.1f, 0.2f, -1}, {0, 0, 1}, 0, INFINITY, 0, 0xffffffffu},
    {"rtc.scenes.ray.degenerate", {27, 0, -1}, {0, 0, 1}, 0, INFINITY, 0, 0xffffffffu},
    {"rtc.scenes.ray.tnearPastTfar", {7.1f, 2.9f, -1}, {0, 0, 1}, 2, 1, 0, 0xffffffffu},
    {"rtc.scenes.ray.tfarPastFloat", {7.1f, 2.9f, -1}, {0, 0, 1}, 0, INFINITY, 0, 0xffffffffu},
    {"rtc.scenes.ray.timeHalf", {7.1f, 2.9f, -1}, {0, 0, 1}, 0, INFINITY, 0.5f, 0xffffffffu},
  };
  for (size_t i = 0; i < sizeof rays / sizeof *rays; i++)
    put_ray_segment(rays[i].key, scene, rays[i].o[0], rays[i].o[1], rays[i].o[2], rays[i].d[0], rays[i].d[1], rays[i].d[2],
                    rays[i].tnear, rays[i].tfar, rays[i].time, rays[i].mask);
  put_rtc("rtc.scenes.rays", "rtcIntersect1");
  /* A mesh added after the commit: Embree's release build answers from the last commit. */
  add_mesh(device, scene);
  first_error = RTC_ERROR_NONE;
  put_ray("rtc.scenes.modified.ray", scene, 1, 1, 5, 0, 0, -1, INFINITY, 0xffffffffu);
  rtcCommitScene(scene);
  put_rtc("rtc.scenes.modified.commit", "rtcCommitScene");
  put_ray("rtc.scenes.modified.rayAfterCommit", scene, 1, 1, 5, 0, 0, -1, INFINITY, 0xffffffffu);
  rtcReleaseScene(scene);
  RTCScene uncommitted = rtcNewScene(device);
  add_mesh(device, uncommitted);
  first_error = RTC_ERROR_NONE;
  put_ray("rtc.scenes.uncommitted.ray", uncommitted, 2.25f, 3.5f, -1, 0, 0, 1, INFINITY, 0xffffffffu);
  rtcReleaseScene(uncommitted);
  /* memlife's device.version, from the properties. */
  begin("rtc.scenes.deviceVersion");
  long long major = (long long)rtcGetDeviceProperty(device, RTC_DEVICE_PROPERTY_VERSION_MAJOR),
            minor = (long long)rtcGetDeviceProperty(device, RTC_DEVICE_PROPERTY_VERSION_MINOR),
            patch = (long long)rtcGetDeviceProperty(device, RTC_DEVICE_PROPERTY_VERSION_PATCH);
  printf("{\"major\":%lld,\"minor\":%lld,\"patch\":%lld,\"string\":\"%lld.%lld.%lld\"}", major, minor, patch, major, minor,
         patch);
  end();
  rtcReleaseDevice(device);
  first_error = RTC_ERROR_NONE;
}

/* memlife's setMemoryBudget(bytes), no JS monitor: the mesh, the commit, device.memory. */
static void budget_run(long long bytes) {
  char key[96];
  RTCDevice device = rtcNewDevice("threads=1");
  rtcSetDeviceErrorFunction(device, on_error, NULL);
  rtcSetDeviceMemoryMonitorFunction(device, monitor, NULL);
  budget = bytes;
  RTCScene scene = rtcNewScene(device);
  const char *failed = add_mesh(device, scene);
  snprintf(key, sizeof key, "rtc.budget(%lld).addTriangleMesh", bytes);
  put_rtc(key, failed ? failed : "rtcAttachGeometry");
  rtcCommitScene(scene);
  snprintf(key, sizeof key, "rtc.budget(%lld).commit", bytes);
  put_rtc(key, "rtcCommitScene");
  rtcReleaseScene(scene);
  rtcReleaseDevice(device);
  first_error = RTC_ERROR_NONE;
  budget = -1;
  snprintf(key, sizeof key, "rtc.budget(%lld).memory", bytes);
  monitor_len = 0; /* only memory is compared: memlife has no JS monitor here to log the calls */
  monitor_log[0] = 0;
  begin(key);
  printf("{\"accounting\":true,\"bytes\":%lld,\"peak\":%lld,\"calls\":%d,\"denied\":%d}", monitor_sum, monitor_peak,
         monitor_calls, monitor_denied);
  end();
  monitor_sum = monitor_peak = 0;
  monitor_calls = monitor_denied = 0;
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
  scenes();
  static const long long budgets[] = {0, 3000, 10000, 18128};
  for (size_t i = 0; i < sizeof budgets / sizeof *budgets; i++) budget_run(budgets[i]);
}

/* --- Constants: memlife's names and values against the headers' -------------------------------- */

/* OpenCL 2.2's status codes (values from the headers); put_status_names adds newer ones and cl_ext.h's. */
#define CL_STATUS_CODES \
  X(CL_SUCCESS) X(CL_DEVICE_NOT_FOUND) X(CL_DEVICE_NOT_AVAILABLE) X(CL_COMPILER_NOT_AVAILABLE) \
  X(CL_MEM_OBJECT_ALLOCATION_FAILURE) X(CL_OUT_OF_RESOURCES) X(CL_OUT_OF_HOST_MEMORY) \
  X(CL_PROFILING_INFO_NOT_AVAILABLE) X(CL_MEM_COPY_OVERLAP) X(CL_IMAGE_FORMAT_MISMATCH) \
  X(CL_IMAGE_FORMAT_NOT_SUPPORTED) X(CL_BUILD_PROGRAM_FAILURE) X(CL_MAP_FAILURE) \
  X(CL_MISALIGNED_SUB_BUFFER_OFFSET) X(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST) \
  X(CL_COMPILE_PROGRAM_FAILURE) X(CL_LINKER_NOT_AVAILABLE) X(CL_LINK_PROGRAM_FAILURE) \
  X(CL_DEVICE_PARTITION_FAILED) X(CL_KERNEL_ARG_INFO_NOT_AVAILABLE) X(CL_INVALID_VALUE) \
  X(CL_INVALID_DEVICE_TYPE) X(CL_INVALID_PLATFORM) X(CL_INVALID_DEVICE) X(CL_INVALID_CONTEXT) \
  X(CL_INVALID_QUEUE_PROPERTIES) X(CL_INVALID_COMMAND_QUEUE) X(CL_INVALID_HOST_PTR) X(CL_INVALID_MEM_OBJECT) \
  X(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR) X(CL_INVALID_IMAGE_SIZE) X(CL_INVALID_SAMPLER) X(CL_INVALID_BINARY) \
  X(CL_INVALID_BUILD_OPTIONS) X(CL_INVALID_PROGRAM) X(CL_INVALID_PROGRAM_EXECUTABLE) \
  X(CL_INVALID_KERNEL_NAME) X(CL_INVALID_KERNEL_DEFINITION) X(CL_INVALID_KERNEL) X(CL_INVALID_ARG_INDEX) \
  X(CL_INVALID_ARG_VALUE) X(CL_INVALID_ARG_SIZE) X(CL_INVALID_KERNEL_ARGS) X(CL_INVALID_WORK_DIMENSION) \
  X(CL_INVALID_WORK_GROUP_SIZE) X(CL_INVALID_WORK_ITEM_SIZE) X(CL_INVALID_GLOBAL_OFFSET) \
  X(CL_INVALID_EVENT_WAIT_LIST) X(CL_INVALID_EVENT) X(CL_INVALID_OPERATION) X(CL_INVALID_GL_OBJECT) \
  X(CL_INVALID_BUFFER_SIZE) X(CL_INVALID_MIP_LEVEL) X(CL_INVALID_GLOBAL_WORK_SIZE) X(CL_INVALID_PROPERTY) \
  X(CL_INVALID_IMAGE_DESCRIPTOR) X(CL_INVALID_COMPILER_OPTIONS) X(CL_INVALID_LINKER_OPTIONS) \
  X(CL_INVALID_DEVICE_PARTITION_COUNT) X(CL_INVALID_PIPE_SIZE) X(CL_INVALID_DEVICE_QUEUE) \
  X(CL_INVALID_SPEC_ID)
static void put_status_names(void) {
  char key[64];
#define X(name) snprintf(key, sizeof key, "const.cl.codeName(%d)", (int)(name)), put_string(key, #name);
  CL_STATUS_CODES
  /* Newer than OpenCL 2.2's headers, or in cl_ext.h: where these headers define them. */
#ifdef CL_MAX_SIZE_RESTRICTION_EXCEEDED
  X(CL_MAX_SIZE_RESTRICTION_EXCEEDED)
#endif
#ifdef CL_INVALID_COMMAND_BUFFER_KHR
  X(CL_INVALID_COMMAND_BUFFER_KHR)
#endif
#ifdef CL_INVALID_SYNC_POINT_WAIT_LIST_KHR
  X(CL_INVALID_SYNC_POINT_WAIT_LIST_KHR)
#endif
#ifdef CL_INCOMPATIBLE_COMMAND_QUEUE_KHR
  X(CL_INCOMPATIBLE_COMMAND_QUEUE_KHR)
#endif
#ifdef CL_INVALID_MUTABLE_COMMAND_KHR
  X(CL_INVALID_MUTABLE_COMMAND_KHR)
#endif
#ifdef CL_PLATFORM_NOT_FOUND_KHR
  X(CL_PLATFORM_NOT_FOUND_KHR)
#endif
#ifdef CL_CONTEXT_TERMINATED_KHR
  X(CL_CONTEXT_TERMINATED_KHR)
#endif
#ifdef CL_DEVICE_PARTITION_FAILED_EXT
  X(CL_DEVICE_PARTITION_FAILED_EXT)
#endif
#ifdef CL_INVALID_PARTITION_COUNT_EXT
  X(CL_INVALID_PARTITION_COUNT_EXT)
#endif
#ifdef CL_INVALID_PARTITION_NAME_EXT
  X(CL_INVALID_PARTITION_NAME_EXT)
#endif
#ifdef CL_INVALID_SEMAPHORE_KHR
  X(CL_INVALID_SEMAPHORE_KHR)
#endif
#ifdef CL_COMMAND_TERMINATED_ITSELF_WITH_FAILURE_ARM
  X(CL_COMMAND_TERMINATED_ITSELF_WITH_FAILURE_ARM)
#endif
#ifdef CL_INVALID_ACCELERATOR_INTEL
  X(CL_INVALID_ACCELERATOR_INTEL)
#endif
#ifdef CL_INVALID_ACCELERATOR_TYPE_INTEL
  X(CL_INVALID_ACCELERATOR_TYPE_INTEL)
#endif
#ifdef CL_INVALID_ACCELERATOR_DESCRIPTOR_INTEL
  X(CL_INVALID_ACCELERATOR_DESCRIPTOR_INTEL)
#endif
#ifdef CL_ACCELERATOR_TYPE_NOT_SUPPORTED_INTEL
  X(CL_ACCELERATOR_TYPE_NOT_SUPPORTED_INTEL)
#endif
#undef X
}

static void put_constants(void) {
  put_status_names();
#define K(group, name, value) begin("const." group "." #name); printf("%lld", (long long)(value)); end();
  K("cl.DeviceType", DEFAULT, CL_DEVICE_TYPE_DEFAULT) K("cl.DeviceType", CPU, CL_DEVICE_TYPE_CPU)
  K("cl.DeviceType", GPU, CL_DEVICE_TYPE_GPU) K("cl.DeviceType", ACCELERATOR, CL_DEVICE_TYPE_ACCELERATOR)
  K("cl.DeviceType", CUSTOM, CL_DEVICE_TYPE_CUSTOM) K("cl.DeviceType", ALL, CL_DEVICE_TYPE_ALL)
  K("cl.MemFlags", READ_WRITE, CL_MEM_READ_WRITE) K("cl.MemFlags", WRITE_ONLY, CL_MEM_WRITE_ONLY)
  K("cl.MemFlags", READ_ONLY, CL_MEM_READ_ONLY) K("cl.MemFlags", USE_HOST_PTR, CL_MEM_USE_HOST_PTR)
  K("cl.MemFlags", ALLOC_HOST_PTR, CL_MEM_ALLOC_HOST_PTR) K("cl.MemFlags", COPY_HOST_PTR, CL_MEM_COPY_HOST_PTR)
  K("cl.MemFlags", SVM_FINE_GRAIN_BUFFER, CL_MEM_SVM_FINE_GRAIN_BUFFER) K("cl.MemFlags", SVM_ATOMICS, CL_MEM_SVM_ATOMICS)
  K("cl.CommandType", NDRANGE_KERNEL, CL_COMMAND_NDRANGE_KERNEL) K("cl.CommandType", TASK, CL_COMMAND_TASK)
  K("cl.CommandType", NATIVE_KERNEL, CL_COMMAND_NATIVE_KERNEL) K("cl.CommandType", READ_BUFFER, CL_COMMAND_READ_BUFFER)
  K("cl.CommandType", WRITE_BUFFER, CL_COMMAND_WRITE_BUFFER) K("cl.CommandType", COPY_BUFFER, CL_COMMAND_COPY_BUFFER)
  K("cl.CommandType", MARKER, CL_COMMAND_MARKER) K("cl.CommandType", USER, CL_COMMAND_USER)
  K("cl.CommandType", BARRIER, CL_COMMAND_BARRIER) K("cl.CommandType", FILL_BUFFER, CL_COMMAND_FILL_BUFFER)
  K("cl.CommandType", SVM_FREE, CL_COMMAND_SVM_FREE) K("cl.CommandType", SVM_MEMCPY, CL_COMMAND_SVM_MEMCPY)
  K("cl.CommandType", SVM_MEMFILL, CL_COMMAND_SVM_MEMFILL) K("cl.CommandType", SVM_MAP, CL_COMMAND_SVM_MAP)
  K("cl.CommandType", SVM_UNMAP, CL_COMMAND_SVM_UNMAP)
  K("cl.ExecutionStatus", COMPLETE, CL_COMPLETE) K("cl.ExecutionStatus", RUNNING, CL_RUNNING)
  K("cl.ExecutionStatus", SUBMITTED, CL_SUBMITTED) K("cl.ExecutionStatus", QUEUED, CL_QUEUED)
  K("rtc.DeviceProperty", VERSION, RTC_DEVICE_PROPERTY_VERSION)
  K("rtc.DeviceProperty", VERSION_MAJOR, RTC_DEVICE_PROPERTY_VERSION_MAJOR)
  K("rtc.DeviceProperty", VERSION_MINOR, RTC_DEVICE_PROPERTY_VERSION_MINOR)
  K("rtc.DeviceProperty", VERSION_PATCH, RTC_DEVICE_PROPERTY_VERSION_PATCH)
  K("rtc.DeviceProperty", TASKING_SYSTEM, RTC_DEVICE_PROPERTY_TASKING_SYSTEM)
#undef K
  /* EmbreeError's codeName of each enum RTCError both majors have. */
  char key[64];
#define X(name) snprintf(key, sizeof key, "const.rtc.codeName(%d)", (int)(name)), put_string(key, #name);
  X(RTC_ERROR_NONE) X(RTC_ERROR_UNKNOWN) X(RTC_ERROR_INVALID_ARGUMENT) X(RTC_ERROR_INVALID_OPERATION)
  X(RTC_ERROR_OUT_OF_MEMORY) X(RTC_ERROR_UNSUPPORTED_CPU) X(RTC_ERROR_CANCELLED)
#undef X
}

int main(void) {
  put_constants();
  opencl();
  embree();
  return 0;
}
