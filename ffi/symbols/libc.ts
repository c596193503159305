/**
 * Every libc entry point memlife binds, as data: keeping Embree and TBB loaded for the whole
 * process (`dlopen`, `dlerror`, see ffi/keep-loaded.ts) and ending the process without exit
 * handlers (`_exit`, `fflush`, see the exit paths of ffi/deno.ts and ffi/node.ts), and the locks that
 * every thread of the process takes alike (`open`, `flock`, `close`; `calloc`, `getenv`, `setenv`,
 * `getpid` for the word of `processWord`: ffi/process-lock.ts).
 */
import type { SymbolTable } from "../types.ts";

export const libcSymbols = {
  dlopen: { args: ["cstring", "i32"], returns: "ptr" }, // void *dlopen(const char *filename, int flags)
  dlerror: { args: [], returns: "ptr" }, // char *dlerror(void)
  _exit: { args: ["i32"], returns: "void" }, // void _exit(int status)
  fflush: { args: ["ptr"], returns: "i32" }, // int fflush(FILE *stream)
  // The process-wide lock of ffi/process-lock.ts. open is variadic in C; two arguments suffice
  // without O_CREAT, and on x86-64 and arm64 they go in the registers a plain call uses.
  open: { args: ["cstring", "i32"], returns: "i32" }, // int open(const char *pathname, int flags, ...)
  flock: { args: ["i32", "i32"], returns: "i32" }, // int flock(int fd, int operation)
  close: { args: ["i32"], returns: "i32" }, // int close(int fd)
  // The word of processWord: allocated once, its address published in the environment.
  calloc: { args: ["usize", "usize"], returns: "ptr" }, // void *calloc(size_t n, size_t size)
  getenv: { args: ["cstring"], returns: "ptr" }, // char *getenv(const char *name)
  setenv: { args: ["cstring", "cstring", "i32"], returns: "i32" }, // int setenv(const char *name, const char *value, int overwrite)
  getpid: { args: [], returns: "i32" }, // pid_t getpid(void)
} as const satisfies SymbolTable;

/**
 * Where libc is, per `process.platform`; none on Windows (nothing to pin, no `_exit` needed). On
 * Linux the bare names first, then where distributions put it: with any `--deny-ffi`, Deno 2.9
 * takes a bare name for a path in the working directory, and without libc memlife could neither
 * pin Embree nor leave without exit handlers (a crash at exit, 3 runs in 3).
 */
export const libcPaths: Readonly<Record<string, readonly string[]>> = {
  linux: [
    "libc.so.6",
    "libc.so",
    "/lib/x86_64-linux-gnu/libc.so.6",
    "/lib/aarch64-linux-gnu/libc.so.6",
    "/lib64/libc.so.6",
    "/usr/lib64/libc.so.6",
    "/usr/lib/libc.so.6",
  ],
  darwin: ["/usr/lib/libSystem.B.dylib"],
};

/** dlopen flags of glibc and musl on Linux. */
export const RTLD_NOW = 0x2;
export const RTLD_GLOBAL = 0x100;
export const RTLD_NODELETE = 0x1000;

/** `RTLD_NOW | RTLD_NODELETE` per `process.platform` (macOS: RTLD_NOW 0x2, RTLD_NODELETE 0x80). */
export const keepLoadedFlags: Readonly<Record<string, number>> = {
  linux: RTLD_NOW | RTLD_NODELETE,
  darwin: 0x2 | 0x80,
};
