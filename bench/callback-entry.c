/*
 * For bench/callback-entry.ts: a destructor callback that stays in C and only records that it ran,
 * so that a loop can tell what entering a JS callback inside clReleaseMemObject costs (PoCL calls
 * destructors there, on the calling thread) from the rest of the loop. Built at run time with cc.
 */
#include <stdint.h>

static int32_t ran;

static void record(void *memobj, void *user_data) {
  (void)memobj;
  (void)user_data;
  ran++;
}

void *recorder(void) {
  return (void *)record;
}

/* The calls recorded since the last take. */
int32_t take(void) {
  int32_t n = ran;
  ran = 0;
  return n;
}
