/* PoCL 3.1: failing a user event (clSetUserEventStatus with a negative status) aborts the process
 * ("PTHREAD ERROR in pocl_update_event_failed(): Invalid argument") when a command queued behind it
 * has had both its buffer and its event released: here in every run, with one command or more, and
 * also when the commands after the first wait on it through the in-order queue only. Keeping either
 * the buffer or the event alive avoids it. memlife fails a user event itself when its last
 * reference goes without a status (see abandon() in src/opencl/event.ts; README, Measured facts).
 * Build: cc pocl-failed-gate.c -lOpenCL; run: ./a.out N (N commands, default 1); prints "ok" if it lives. */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1;
  cl_platform_id p; cl_device_id d; cl_int e;
  clGetPlatformIDs(1, &p, NULL);
  clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &d, NULL);
  cl_context ctx = clCreateContext(NULL, 1, &d, NULL, NULL, &e);
  cl_command_queue q = clCreateCommandQueueWithProperties(ctx, d, NULL, &e);
  static char host[64];
  cl_event gate = clCreateUserEvent(ctx, &e);
  for (int i = 0; i < n; i++) {
    cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64, NULL, &e);
    cl_event ev;
    clEnqueueWriteBuffer(q, b, CL_FALSE, 0, 64, host, 1, &gate, &ev);
    clReleaseEvent(ev);
    clReleaseMemObject(b);
  }
  clSetUserEventStatus(gate, CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
  clReleaseEvent(gate);
  clFinish(q);
  puts("ok");
  return 0;
}
