/*
 * An OpenCL "driver" that fails one call on purpose: loaded as OPENCL_LIBRARY, it defines the
 * functions below and leaves every other symbol to the real ICD loader it links (as
 * sync-driver.c). With MEMLIFE_FAIL_FN=<name> and MEMLIFE_FAIL_NTH=<n>, the n-th call of that
 * function (and the MEMLIFE_FAIL_COUNT - 1 after it, default none) returns MEMLIFE_FAIL_CODE
 * (default CL_OUT_OF_RESOURCES) without reaching the driver,
 * as a driver out of resources would; every other call goes through. A hostile pass found with
 * it where an ordinary OpenCL error left memlife leaking, half released, or throwing uncaught.
 *
 * Build: cc -O2 -fPIC -shared -o libfault-driver.so fault-driver.c -Wl,--no-as-needed -lOpenCL -ldl
 */
#define CL_TARGET_OPENCL_VERSION 300
#define _GNU_SOURCE
#include <CL/cl.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *next(const char *name) { return dlsym(RTLD_NEXT, name); }

/* How many calls failed on purpose: the test checks that its failure happened. */
static int failures;
int fault_driver_failures(void) { return failures; }

/* The error to return for this call of `fn`, or 0 to let it through. */
static cl_int injected(const char *fn, long *calls) {
  const char *name = getenv("MEMLIFE_FAIL_FN"), *nth = getenv("MEMLIFE_FAIL_NTH"), *code = getenv("MEMLIFE_FAIL_CODE");
  const char *count = getenv("MEMLIFE_FAIL_COUNT");
  if (name == NULL || strcmp(name, fn) != 0) return 0;
  long first = nth != NULL ? atol(nth) : 1, n = count != NULL ? atol(count) : 1;
  ++*calls;
  if (*calls < first || *calls >= first + n) return 0;
  failures++;
  return code != NULL ? (cl_int)atoi(code) : CL_OUT_OF_RESOURCES;
}

#define PASS_OR_FAIL(fn)                \
  static long calls;                    \
  cl_int failure = injected(#fn, &calls); \
  if (failure != 0) return failure

CL_API_ENTRY cl_int CL_API_CALL clSetMemObjectDestructorCallback(cl_mem mem, void(CL_CALLBACK *notify)(cl_mem, void *),
                                                                 void *user_data) {
  PASS_OR_FAIL(clSetMemObjectDestructorCallback);
  return ((cl_int(*)(cl_mem, void(CL_CALLBACK *)(cl_mem, void *), void *))next(__func__))(mem, notify, user_data);
}

CL_API_ENTRY cl_int CL_API_CALL clGetEventInfo(cl_event event, cl_event_info what, size_t size, void *value,
                                               size_t *size_ret) {
  PASS_OR_FAIL(clGetEventInfo);
  return ((cl_int(*)(cl_event, cl_event_info, size_t, void *, size_t *))next(__func__))(event, what, size, value, size_ret);
}

CL_API_ENTRY cl_int CL_API_CALL clSetEventCallback(cl_event event, cl_int type,
                                                   void(CL_CALLBACK *notify)(cl_event, cl_int, void *), void *user_data) {
  PASS_OR_FAIL(clSetEventCallback);
  return ((cl_int(*)(cl_event, cl_int, void(CL_CALLBACK *)(cl_event, cl_int, void *), void *))next(__func__))(
      event, type, notify, user_data);
}

CL_API_ENTRY cl_int CL_API_CALL clRetainEvent(cl_event event) {
  PASS_OR_FAIL(clRetainEvent);
  return ((cl_int(*)(cl_event))next(__func__))(event);
}

/*
 * With MEMLIFE_FAIL_FN=clGetKernelWorkGroupInfo and MEMLIFE_FAIL_CODE=pocl5, CL_KERNEL_LOCAL_MEM_SIZE
 * answers as PoCL 5.0 does on the GPU machine: 0 for a kernel whose local memory is all __local
 * arguments (it counts none of them), every call (each counted as a failure).
 */
CL_API_ENTRY cl_int CL_API_CALL clGetKernelWorkGroupInfo(cl_kernel kernel, cl_device_id device,
                                                         cl_kernel_work_group_info what, size_t size, void *value,
                                                         size_t *size_ret) {
  const char *name = getenv("MEMLIFE_FAIL_FN"), *code = getenv("MEMLIFE_FAIL_CODE");
  if (name != NULL && strcmp(name, __func__) == 0 && code != NULL && strcmp(code, "pocl5") == 0 &&
      what == CL_KERNEL_LOCAL_MEM_SIZE && size >= sizeof(cl_ulong) && value != NULL) {
    failures++;
    *(cl_ulong *)value = 0;
    if (size_ret != NULL) *size_ret = sizeof(cl_ulong);
    return CL_SUCCESS;
  }
  PASS_OR_FAIL(clGetKernelWorkGroupInfo);
  return ((cl_int(*)(cl_kernel, cl_device_id, cl_kernel_work_group_info, size_t, void *, size_t *))next(__func__))(
      kernel, device, what, size, value, size_ret);
}

/*
 * With MEMLIFE_SVM_CAPS=<n>, CL_DEVICE_SVM_CAPABILITIES answers n for every device, as a device
 * without some SVM kind does (NVIDIA: 1, coarse-grain buffers only; 0: no SVM), so that memlife's
 * refusal of a kind the device lacks is tested on PoCL, which has them all. clSVMAlloc counts the
 * calls that reached it: the refusal must come before the native call. With MEMLIFE_FAIL_FN=clSVMAlloc
 * the chosen call returns NULL, as a driver that cannot allocate does (clSVMAlloc has no error code).
 */
static long svm_allocs;
long fault_driver_svm_allocs(void) { return svm_allocs; }

CL_API_ENTRY cl_int CL_API_CALL clGetDeviceInfo(cl_device_id device, cl_device_info what, size_t size, void *value,
                                                size_t *size_ret) {
  const char *caps = getenv("MEMLIFE_SVM_CAPS");
  if (caps != NULL && what == CL_DEVICE_SVM_CAPABILITIES) {
    if (value != NULL && size < sizeof(cl_device_svm_capabilities)) return CL_INVALID_VALUE;
    if (value != NULL) *(cl_device_svm_capabilities *)value = (cl_device_svm_capabilities)atol(caps);
    if (size_ret != NULL) *size_ret = sizeof(cl_device_svm_capabilities);
    return CL_SUCCESS;
  }
  return ((cl_int(*)(cl_device_id, cl_device_info, size_t, void *, size_t *))next(__func__))(device, what, size, value,
                                                                                              size_ret);
}

/*
 * With MEMLIFE_SVM_OVERLAP=1, clSVMAlloc and clSVMFree each stay 200 us inside and count the calls
 * that found another of them inside, from another thread. NVIDIA's SVM allocator (580, H200) is not
 * safe for that: from 4 threads at once clSVMAlloc returned NULL for 12-17 of 800 allocations, and
 * memory it freed went from under other threads (test/device/results/svm-threads-nvidia-h200-*).
 */
/*
 * And the platform's name is not PoCL's, whose allocator is thread-safe (memlife serializes every
 * other's): the driver's own name with a suffix, so that MEMLIFE_OPENCL_PLATFORM still picks it.
 */
CL_API_ENTRY cl_int CL_API_CALL clGetPlatformInfo(cl_platform_id platform, cl_platform_info what, size_t size,
                                                  void *value, size_t *size_ret) {
  typedef cl_int (*info_fn)(cl_platform_id, cl_platform_info, size_t, void *, size_t *);
  const char *watch = getenv("MEMLIFE_SVM_OVERLAP"), *suffix = " (memlife fault driver: SVM not thread-safe)";
  if (watch == NULL || strcmp(watch, "1") != 0 || what != CL_PLATFORM_NAME)
    return ((info_fn)next(__func__))(platform, what, size, value, size_ret);
  char name[512];
  size_t length = 0;
  cl_int status = ((info_fn)next(__func__))(platform, what, sizeof name - strlen(suffix), name, &length);
  if (status != CL_SUCCESS) return status;
  strcat(name, suffix);
  if (value != NULL && size < strlen(name) + 1) return CL_INVALID_VALUE;
  if (value != NULL) memcpy(value, name, strlen(name) + 1);
  if (size_ret != NULL) *size_ret = strlen(name) + 1;
  return CL_SUCCESS;
}
static int svm_inside;
static long svm_overlaps;
long fault_driver_svm_overlaps(void) { return __atomic_load_n(&svm_overlaps, __ATOMIC_SEQ_CST); }
static int svm_enter(void) {
  const char *watch = getenv("MEMLIFE_SVM_OVERLAP");
  if (watch == NULL || strcmp(watch, "1") != 0) return 0;
  if (__atomic_fetch_add(&svm_inside, 1, __ATOMIC_SEQ_CST) != 0) __atomic_fetch_add(&svm_overlaps, 1, __ATOMIC_SEQ_CST);
  usleep(200);
  return 1;
}
static void svm_leave(int entered) {
  if (entered) __atomic_fetch_sub(&svm_inside, 1, __ATOMIC_SEQ_CST);
}

CL_API_ENTRY void *CL_API_CALL clSVMAlloc(cl_context context, cl_svm_mem_flags flags, size_t size, cl_uint alignment) {
  __atomic_fetch_add(&svm_allocs, 1, __ATOMIC_SEQ_CST);
  static long calls;
  if (injected(__func__, &calls) != 0) return NULL;
  int entered = svm_enter();
  void *p = ((void *(*)(cl_context, cl_svm_mem_flags, size_t, cl_uint))next(__func__))(context, flags, size, alignment);
  svm_leave(entered);
  return p;
}

CL_API_ENTRY void CL_API_CALL clSVMFree(cl_context context, void *pointer) {
  int entered = svm_enter();
  ((void (*)(cl_context, void *))next(__func__))(context, pointer);
  svm_leave(entered);
}
