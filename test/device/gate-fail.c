// What a driver does with an in-order command enqueued right after clSetUserEventStatus(gate, -5)
// returned, behind a command gated on `gate` (test/robust-async.spec.ts "commands enqueued after
// setStatus(-5) returned..."). Build here (gcc -o /tmp/gate-fail test/device/gate-fail.c -lOpenCL,
// the GPU machine has no compiler) and run with the platform's name: `gate-fail NVIDIA 300`.
// Prints the gated command's status right after the call, and how many later writes and reads
// failed. PoCL 3.1: failed in the call, 0 later commands failed. NVIDIA (H200, driver 580, stop
// 40): CL_QUEUED after the call; 240 of 300 later writes failed (1 MiB write ahead), 245 (64 B),
// 284 (16 MiB).
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) {
  const char *want = argc > 1 ? argv[1] : "";
  int rounds = argc > 2 ? atoi(argv[2]) : 200;
  int bigsz = argc > 3 ? atoi(argv[3]) : (1 << 20);
  cl_platform_id ps[8]; cl_uint np;
  clGetPlatformIDs(8, ps, &np);
  cl_platform_id p = 0;
  for (cl_uint i = 0; i < np; i++) { char n[256]; clGetPlatformInfo(ps[i], CL_PLATFORM_NAME, 256, n, 0); if (strstr(n, want)) { p = ps[i]; printf("platform %s\n", n); break; } }
  if (!p) { printf("no platform %s\n", want); return 1; }
  cl_device_id d; clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &d, 0);
  cl_int e; cl_context ctx = clCreateContext(0, 1, &d, 0, 0, &e);
  cl_command_queue q = clCreateCommandQueueWithProperties(ctx, d, 0, &e);
  unsigned char *big = calloc(1, bigsz); unsigned char small[64], back[64];
  cl_mem bp = clCreateBuffer(ctx, 0, bigsz, 0, &e), bc = clCreateBuffer(ctx, 0, 64, 0, &e);
  int afterFailed = 0, readFailed = 0, wrongByte = 0, st[5] = {0};
  for (int r = 0; r < rounds; r++) {
    cl_event gate = clCreateUserEvent(ctx, &e), before, gated, after, rd;
    clEnqueueWriteBuffer(q, bp, CL_FALSE, 0, bigsz, big, 0, 0, &before);
    clEnqueueWriteBuffer(q, bc, CL_FALSE, 0, 64, small, 1, &gate, &gated);
    clSetUserEventStatus(gate, -5);
    cl_int gs; clGetEventInfo(gated, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof gs, &gs, 0);
    st[gs < 0 ? 4 : gs > 3 ? 3 : gs]++;
    memset(small, r + 1, 64);
    clEnqueueWriteBuffer(q, bc, CL_FALSE, 0, 64, small, 0, 0, &after);
    cl_int re = clEnqueueReadBuffer(q, bc, CL_FALSE, 0, 64, back, 0, 0, &rd);
    clFinish(q);
    cl_int as, rs; clGetEventInfo(after, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof as, &as, 0);
    clGetEventInfo(rd, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof rs, &rs, 0);
    if (as < 0) { afterFailed++; if (afterFailed <= 3) printf("round %d: after status %d (gated at return %d)\n", r, as, gs); }
    if (rs < 0 || re) readFailed++; else if (back[0] != (unsigned char)(r + 1)) wrongByte++;
    clReleaseEvent(gate); clReleaseEvent(before); clReleaseEvent(gated); clReleaseEvent(after); clReleaseEvent(rd);
  }
  printf("rounds %d big %d: after failed %d, read failed %d, wrong byte %d; gated right after setStatus: failed %d, complete %d, running %d, submitted %d, queued %d\n", rounds, bigsz, afterFailed, readFailed, wrongByte, st[4], st[0], st[1], st[2], st[3]);
  return 0;
}
