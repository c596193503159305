/*
 * libmemlife-ledger: ffi/ledger.c and ffi/event-relay.c as a library for Deno and Node, which
 * cannot compile C at run time as Bun does, and two pointer conversions for Deno. Built ahead of
 * time by ffi/prebuilt/build.sh into ffi/prebuilt/<os>-<arch>/ and shipped in the npm package;
 * where it is absent or cannot load, the backends fall back to the JS ledger (ffi/js-ledger.ts),
 * which asks JS for every call, and Deno to its own conversions. Nothing here is built on install.
 */
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* A forwarding account's call goes to the backend's JS callback, which has the monitor's own
 * signature (`user_data` declared usize: the account id). */
typedef bool (*monitor_fn)(uintptr_t id, ssize_t bytes, bool post);

static uint64_t ledger_forward(void *relay, uint64_t id, uint64_t bytes, uint64_t post) {
  return ((monitor_fn)relay)((uintptr_t)id, (ssize_t)bytes, post != 0) ? 1 : 0;
}

#include "../ledger.c"
#include "../event-relay.c"

/* Deno's own conversions between a pointer object and its address, Deno.UnsafePointer.create and
 * .value, are ops of 55-65 ns each (Deno 2.9); a fast FFI call that returns its argument as the
 * other type takes 9. ffi/deno.ts uses these where the library opens; they keep no state. */
void *memlife_pointer(uint64_t address) {
  return (void *)(uintptr_t)address;
}

uint64_t memlife_address(const void *pointer) {
  return (uint64_t)(uintptr_t)pointer;
}

#ifndef LEDGER_SOURCE_HASH
#error "build with ffi/prebuilt/build.sh, which passes -DLEDGER_SOURCE_HASH"
#endif

/* The hash of the sources this library was built from: a test compares it with the sources in
 * the tree, so a stale library cannot ship. */
const char *ledger_source_hash(void) {
  return LEDGER_SOURCE_HASH;
}
