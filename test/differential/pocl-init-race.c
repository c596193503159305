/* PoCL 3.1: threads that make their first clGetDeviceIDs at once get CL_DEVICE_NOT_FOUND (-1) in about
 * 1 run of 3 (34 of 100 here). Why memlife asks Worker users to set OpenCL up on one thread first
 * (README, Workers). Build: cc pocl-init-race.c -lOpenCL -lpthread; prints a line per failed thread. */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <pthread.h>
#include <stdio.h>
static void *go(void *arg) {
  cl_platform_id p[4]; cl_uint np = 0; cl_device_id d[4]; cl_uint nd = 0;
  cl_int e = clGetPlatformIDs(4, p, &np);
  cl_int e2 = np ? clGetDeviceIDs(p[0], CL_DEVICE_TYPE_ALL, 4, d, &nd) : -999;
  if (e || e2 || nd == 0) printf("thread %ld: %d %u %d %u\n", (long)arg, e, np, e2, nd);
  return 0;
}
int main(void) { pthread_t t[4]; for (long i = 0; i < 4; i++) pthread_create(&t[i], 0, go, (void*)i); for (int i = 0; i < 4; i++) pthread_join(t[i], 0); return 0; }
