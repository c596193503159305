/*
 * An OpenCL "driver" that calls pfn_free_func on the calling thread, inside clEnqueueSVMFree, as
 * NVIDIA's does: loaded as OPENCL_LIBRARY, it defines clEnqueueSVMFree and leaves every other
 * symbol to the real ICD loader it is linked against (dlsym on this library's handle searches its
 * dependencies). PoCL calls pfn_free_func on a worker thread later; this makes its CPU device
 * answer like the GPU machine, so that what happens to a callback made on the JS thread, at the
 * edge of the stack included, is tested here on every runtime.
 *
 * Build: cc -O2 -fPIC -shared -o libsync-driver.so sync-driver.c -lOpenCL -ldl
 */
#define CL_TARGET_OPENCL_VERSION 300
#define _GNU_SOURCE
#include <CL/cl.h>
#include <dlfcn.h>
#include <stddef.h>

typedef void(CL_CALLBACK *svm_free_fn)(cl_command_queue, cl_uint, void *[], void *);
typedef cl_int (*enqueue_svm_free_fn)(cl_command_queue, cl_uint, void *[], svm_free_fn, void *, cl_uint,
                                      const cl_event *, cl_event *);

/* How many frees called back inside the call: the test checks that this library was used. */
static unsigned long sync_frees;
unsigned long sync_driver_frees(void) { return sync_frees; }

CL_API_ENTRY cl_int CL_API_CALL clEnqueueSVMFree(cl_command_queue queue, cl_uint count, void *pointers[],
                                                 svm_free_fn pfn_free_func, void *user_data,
                                                 cl_uint num_events, const cl_event *wait_list, cl_event *event) {
  if (pfn_free_func == NULL) {
    enqueue_svm_free_fn real = (enqueue_svm_free_fn)dlsym(RTLD_NEXT, "clEnqueueSVMFree");
    if (real == NULL) return CL_INVALID_OPERATION;
    return real(queue, count, pointers, NULL, NULL, num_events, wait_list, event);
  }
  if (count == 0 || pointers == NULL) return CL_INVALID_VALUE;
  /* In queue order: what was queued before, and the wait list, complete first. */
  cl_int status = clFinish(queue);
  if (status == CL_SUCCESS && num_events > 0) status = clWaitForEvents(num_events, wait_list);
  if (status != CL_SUCCESS) return status;
  cl_event marker = NULL;
  status = clEnqueueMarkerWithWaitList(queue, 0, NULL, &marker);
  if (status != CL_SUCCESS) return status;
  clWaitForEvents(1, &marker);
  sync_frees++;
  pfn_free_func(queue, count, pointers, user_data);
  if (event != NULL) *event = marker;
  else clReleaseEvent(marker);
  return CL_SUCCESS;
}
