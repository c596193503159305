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
import type { NativeLibrary, Pointer, SymbolTable } from "./types.ts";
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

/** What `processWord` needs of its backend besides libc. */
export interface WordMemory {
  readCString(pointer: Pointer): string;
  address(pointer: Pointer | null): bigint;
  fromAddress(address: bigint): Pointer | null;
  arrayBuffer(pointer: Pointer, byteLength: number): ArrayBuffer;
}

/** The environment variable that tells a realm where the process's word is: `pid:address` (hex). */
export const PROCESS_WORD_VARIABLE = "MEMLIFE_PROCESS_WORD";

/**
 * A 32-bit word of memory that every realm of the process sees alike (Workers, the isolates of
 * `deno test --parallel`), for a lock cheap enough for every call of a hot path: taken with
 * `Atomics.compareExchange`, a few nanoseconds where a `processLock` costs four system calls. The
 * first realm that asks allocates it (libc calloc, never freed) and publishes its address in the
 * environment, `MEMLIFE_PROCESS_WORD=pid:address`; later realms find it there. Both under
 * `exclusive`, so that two realms never make two words. The pid is there for a child process,
 * which inherits the variable but not the memory: it makes a word of its own. Where libc cannot be
 * opened, a word of this realm only.
 */
export function processWord(
  open: Open,
  os: string,
  memory: WordMemory,
  exclusive: <T>(fn: () => T) => T,
): () => Int32Array {
  const libc = libcOf(open, os);
  let word: Int32Array | undefined;
  const find = (): Int32Array => {
    const lib = libc();
    if (lib === null) return new Int32Array(1);
    const pid = lib.symbols.getpid();
    const published = lib.symbols.getenv(PROCESS_WORD_VARIABLE) as Pointer | null;
    const found = /^(\d+):([0-9a-f]{1,16})$/.exec(published === null ? "" : memory.readCString(published));
    let pointer = found !== null && Number(found[1]) === pid ? memory.fromAddress(BigInt(`0x${found[2]}`)) : null;
    if (pointer === null) {
      // 64 bytes: a cache line of its own.
      pointer = lib.symbols.calloc(1, 64) as Pointer | null;
      if (pointer === null) {
        throw new RangeError("memlife: calloc of 64 bytes for the process's lock word returned NULL");
      }
      lib.symbols.setenv(PROCESS_WORD_VARIABLE, `${pid}:${memory.address(pointer).toString(16)}`, 1);
    }
    return new Int32Array(memory.arrayBuffer(pointer, 4));
  };
  return () => (word ??= exclusive(find));
}
