/*
 * libmemlife-ledger: ffi/ledger.c and ffi/event-relay.c as a library for Deno and Node, which
 * cannot compile C at run time as Bun does. Built ahead of time by ffi/prebuilt/build.sh into ffi/prebuilt/<os>-<arch>/
 * and shipped in the npm package; where it is absent or cannot load, the backends fall back to the
 * JS ledger (ffi/js-ledger.ts), which asks JS for every call. Nothing here is built on install.
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

#ifndef LEDGER_SOURCE_HASH
#error "build with ffi/prebuilt/build.sh, which passes -DLEDGER_SOURCE_HASH"
#endif

/* The hash of the sources this library was built from: a test compares it with the sources in
 * the tree, so a stale library cannot ship. */
const char *ledger_source_hash(void) {
  return LEDGER_SOURCE_HASH;
}
