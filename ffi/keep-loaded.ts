/**
 * The `keepLoaded` option of every backend's `open`: the library is opened once more through libc
 * with RTLD_NODELETE before the runtime opens it, so that it and its dependencies (Embree's TBB)
 * stay mapped until the process ends. Deno and Node unload libraries at exit while TBB worker
 * threads still run in them, and segfault.
 */
import { BackendError } from "./errors.ts";
import type { NativeLibrary, SymbolTable } from "./types.ts";
import { keepLoadedFlags, libcPaths, libcSymbols, RTLD_NOW } from "./symbols/libc.ts";

type Open = <T extends SymbolTable>(path: string, table: T) => NativeLibrary<T>;

/** libc's table for one backend, opened on first use; null where libc cannot be opened (Windows). */
export function libcOf(open: Open, os: string): () => NativeLibrary<typeof libcSymbols> | null {
  let libc: NativeLibrary<typeof libcSymbols> | null | undefined;
  return () => {
    if (libc === undefined) {
      libc = null;
      for (const candidate of libcPaths[os] ?? []) {
        try {
          libc = open(candidate, libcSymbols);
          break;
        } catch {
          // The next name; without libc the library is simply not pinned.
        }
      }
    }
    return libc;
  };
}

/**
 * A `keepLoaded(path)` for one backend. Where libc cannot be opened (Windows) it does nothing: the
 * runtime's own handle is all there is. A failing dlopen throws a BackendError with dlerror's
 * message, so that the caller treats the path as one that does not load.
 */
export function keepLoader(open: Open, readCString: (pointer: never) => string, os: string): (path: string) => void {
  const libc = libcOf(open, os);
  return (path) => {
    const lib = libc();
    if (lib === null) return;
    if (lib.symbols.dlopen(path, keepLoadedFlags[os]) === null) {
      const message = lib.symbols.dlerror();
      throw new BackendError(
        `memlife: keeping ${path} loaded: ${message === null ? "dlopen failed" : readCString(message as never)}`,
      );
    }
  };
}

/**
 * Why the dynamic loader cannot open `path`: libc's own dlopen and dlerror, or null when it can
 * (the library then stays loaded, as memlife's libraries do anyway) or there is no libc. For Bun,
 * whose dlopen retries a bare name that failed to load as a file in the working directory and
 * reports only that retry ("/cwd/libOpenCL.so.1: cannot open shared object file: No such file or
 * directory"), hiding why the file the loader found did not load (not a library, a missing
 * dependency, the wrong architecture).
 */
export function loaderReason(
  open: Open,
  readCString: (pointer: never) => string,
  os: string,
): (path: string) => string | null {
  const libc = libcOf(open, os);
  return (path) => {
    const lib = libc();
    if (lib === null || lib.symbols.dlopen(path, RTLD_NOW) !== null) return null;
    const message = lib.symbols.dlerror();
    return message === null ? null : readCString(message as never);
  };
}
