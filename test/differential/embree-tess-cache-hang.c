/* Embree 3.13.5: rtcNewDevice("tessellation_cache_size=-5") fails with RTC_ERROR_OUT_OF_MEMORY (4)
 * and leaves the tessellation cache's locks held (the negative size is taken as a huge one, whose
 * mapping fails inside the locked resize); the next rtcNewDevice of the process that resizes the
 * cache spins for ever. Here in every run (this program never prints "second"); through memlife on
 * Bun, whose next device happened to resize, not on Node or Deno. README, Measured facts.
 * Build: cc embree-tess-cache-hang.c -lembree3; run under `timeout 10`. */
#include <embree3/rtcore.h>
#include <stdio.h>
int main(void) {
  RTCDevice a = rtcNewDevice("tessellation_cache_size=-5");
  printf("first %p, error %d\n", (void *)a, rtcGetDeviceError(NULL));
  fflush(stdout);
  RTCDevice b = rtcNewDevice("");
  printf("second %p\n", (void *)b);
  return 0;
}
