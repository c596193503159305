/*
 * An Embree that misbehaves on purpose: loaded as EMBREE_LIBRARY, it defines the functions below
 * and leaves every other symbol to the real Embree it links (dlsym on this library's handle
 * searches its dependencies). A hostile pass found with such a library that a version property it
 * reported chose rtcIntersect1's arguments (SIGSEGV), that a scene's release error rejected a
 * commit that had succeeded, and that a NULL device with no error code read RTC_ERROR_NONE.
 *
 *   MEMLIFE_EMBREE_VERSION=<n>     rtcGetDeviceProperty(VERSION) answers n
 *   MEMLIFE_EMBREE_RELEASE_ERROR=1 rtcReleaseScene reports RTC_ERROR_UNKNOWN through the device's
 *                                  error function (the one memlife registered), then releases
 *   MEMLIFE_EMBREE_NULL_DEVICE=1   rtcNewDevice returns NULL without setting an error
 *
 * Build: cc -O2 -fPIC -shared -o libembree-fault.so embree-fault.c -Wl,--no-as-needed <libembree> -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/types.h>

typedef void *RTCDevice;
typedef void *RTCScene;
typedef void (*error_fn)(void *user, int code, const char *message);

static void *next(const char *name) { return dlsym(RTLD_NEXT, name); }

/* The error function memlife registered, per device (a few suffice for the tests). */
static struct { RTCDevice device; error_fn fn; void *user; } errors[64];
static int error_count;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct { RTCScene scene; RTCDevice device; } scenes[1024];
static int scene_count;

RTCDevice rtcNewDevice(const char *config) {
  if (getenv("MEMLIFE_EMBREE_NULL_DEVICE") != NULL) return NULL;
  return ((RTCDevice(*)(const char *))next(__func__))(config);
}

void rtcSetDeviceErrorFunction(RTCDevice device, error_fn fn, void *user) {
  pthread_mutex_lock(&mu);
  if (error_count < 64) {
    errors[error_count].device = device;
    errors[error_count].fn = fn;
    errors[error_count].user = user;
    error_count++;
  }
  pthread_mutex_unlock(&mu);
  ((void (*)(RTCDevice, error_fn, void *))next(__func__))(device, fn, user);
}

ssize_t rtcGetDeviceProperty(RTCDevice device, int property) {
  const char *version = getenv("MEMLIFE_EMBREE_VERSION");
  if (property == 0 && version != NULL) return (ssize_t)atoll(version);
  return ((ssize_t(*)(RTCDevice, int))next(__func__))(device, property);
}

RTCScene rtcNewScene(RTCDevice device) {
  RTCScene scene = ((RTCScene(*)(RTCDevice))next(__func__))(device);
  pthread_mutex_lock(&mu);
  if (scene_count < 1024) {
    scenes[scene_count].scene = scene;
    scenes[scene_count].device = device;
    scene_count++;
  }
  pthread_mutex_unlock(&mu);
  return scene;
}

void rtcReleaseScene(RTCScene scene) {
  if (getenv("MEMLIFE_EMBREE_RELEASE_ERROR") != NULL) {
    error_fn fn = NULL;
    void *user = NULL;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < scene_count; i++) {
      if (scenes[i].scene != scene) continue;
      for (int j = error_count - 1; j >= 0; j--) {
        if (errors[j].device == scenes[i].device) {
          fn = errors[j].fn;
          user = errors[j].user;
          break;
        }
      }
    }
    pthread_mutex_unlock(&mu);
    if (fn != NULL) fn(user, 1 /* RTC_ERROR_UNKNOWN */, "embree-fault: rtcReleaseScene");
  }
  ((void (*)(RTCScene))next(__func__))(scene);
}
