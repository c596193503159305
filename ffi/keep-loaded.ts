/**
 * The `keepLoaded` option of every backend's `open`: the library is opened once more through libc
 * with RTLD_NODELETE before the runtime opens it, so that it and its dependencies (Embree's TBB)
 * stay mapped until the process ends. Deno and Node unload libraries at exit while TBB worker
 * threads still run in them, and segfault.
 */
import { BackendError } from "./errors.ts";
import type { NativeLibrary, SymbolTable } from "./types.ts";
import { keepLoadedFlags, libcPaths, libcSymbols } from "./symbols/libc.ts";

type Open = <T extends SymbolTable>(path: string, table: T) => NativeLibrary<T>;

/**
 * A `keepLoaded(path)` for one backend. Where libc cannot be opened (Windows) it does nothing: the
 * runtime's own handle is all there is. A failing dlopen throws a BackendError with dlerror's
 * message, so that the caller treats the path as one that does not load.
 */
export function keepLoader(open: Open, readCString: (pointer: never) => string, os: string): (path: string) => void {
  let libc: NativeLibrary<typeof libcSymbols> | null | undefined;
  return (path) => {
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
    if (libc === null) return;
    if (libc.symbols.dlopen(path, keepLoadedFlags[os]) === null) {
      const message = libc.symbols.dlerror();
      throw new BackendError(
        `memlife: keeping ${path} loaded: ${message === null ? "dlopen failed" : readCString(message as never)}`,
      );
    }
  };
}
