/** Finding and opening a native library: an override variable first, then a search list per OS. */
import type { NativeLibrary, OpenOptions, SymbolTable } from "../ffi/types.ts";
import { backend, envVar, osName } from "./backend.ts";
import { LibraryLoadError } from "./errors.ts";

export interface LibrarySearch {
  /** Human name, e.g. "OpenCL". */
  readonly name: string;
  /** Environment variable that names the library file and overrides the search. */
  readonly envVar: string;
  /** File names or paths per `process.platform`, most preferred first. */
  readonly candidates: Readonly<Record<string, readonly string[]>>;
  /** What to install, shown when nothing loads. */
  readonly hint: string;
}

/** The path that loaded, or a LibraryLoadError listing every path tried and each failure. */
export function openLibrary<T extends SymbolTable>(
  search: LibrarySearch,
  table: T,
  options?: OpenOptions,
): NativeLibrary<T> {
  const override = envVar(search.envVar);
  const paths = override ? [override] : [...(search.candidates[osName] ?? search.candidates.linux ?? [])];
  const tried: string[] = [];
  const errors: unknown[] = [];
  for (const path of paths) {
    try {
      return backend.open(path, table, options);
    } catch (error) {
      // The backend's own native part failed (ffi/errors.ts BackendError `whatever`): every path
      // would, and a "could not load" naming the library would send the user to the wrong fix.
      if ((error as { whatever?: unknown } | null)?.whatever === true) throw error;
      tried.push(path);
      errors.push(error);
    }
  }
  const via = override ? `$${search.envVar}=${override}` : `$${search.envVar} unset`;
  const reasons = errors.map((e, i) => `${tried[i]}: ${e instanceof Error ? e.message : String(e)}`).join("; ");
  throw new LibraryLoadError(
    search.name,
    tried,
    `(${via}) ${search.hint} Set ${search.envVar} to the library's path to use another one. Failures: ${reasons}`,
    { cause: errors[errors.length - 1] },
  );
}
