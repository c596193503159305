/**
 * A lock that every thread of the process takes alike, whichever JS isolate runs on it: the files of
 * `deno test --parallel` are isolates of one process, as Workers are, and share nothing in JS.
 * flock(2) on a descriptor of /proc/self/stat opened for each take: flock excludes the other open
 * descriptions of a file, within one process too, and /proc/self/stat is this process's own file,
 * so no other process waits on it. Linux only; elsewhere, or without libc, `fn` runs unlocked.
 *
 * What it guards (src/opencl/platform.ts): PoCL 3.1's first initialization is not thread-safe.
 * clGetDeviceIDs from 4 threads at once said CL_DEVICE_NOT_FOUND in 19 C runs of 40, and four
 * `deno test --parallel` files that each made a context crashed in PoCL (SIGSEGV in strlen) in 2
 * runs of 4 (test/test-runners.spec.ts).
 */
import type { NativeLibrary, SymbolTable } from "./types.ts";
import { libcOf } from "./keep-loaded.ts";

type Open = <T extends SymbolTable>(path: string, table: T) => NativeLibrary<T>;

const LOCK_EX = 2;
const LOCK_UN = 8;
const O_RDONLY = 0;
const O_CLOEXEC = 0o2000000;

export function processLock(open: Open, os: string): <T>(fn: () => T) => T {
  const libc = libcOf(open, os);
  return (fn) => {
    const lib = os === "linux" ? libc() : null;
    const fd = lib === null ? -1 : lib.symbols.open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    // No /proc (a container without it): unlocked, as without libc.
    if (fd < 0) return fn();
    try {
      lib!.symbols.flock(fd, LOCK_EX);
      return fn();
    } finally {
      // Closing the descriptor also drops the lock; unlocking first says so.
      lib!.symbols.flock(fd, LOCK_UN);
      lib!.symbols.close(fd);
    }
  };
}
