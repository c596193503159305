/*
 * For bench/callback-args.ts: calls a callback of the destructor's shape, (void *, void *
 * user_data), n times on the calling thread, with user_data 1..n, as a driver calls memlife's
 * trampoline. Built at run time with cc.
 */
#include <stdint.h>

void call_n(void (*fn)(void *, uintptr_t), int32_t n) {
  for (int32_t i = 1; i <= n; i++) fn((void *)0x1000, (uintptr_t)i);
}
