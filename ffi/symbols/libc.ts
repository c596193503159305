/** The few libc entry points the core needs (keeping Embree and TBB loaded for the whole process). */
import type { SymbolTable } from "../types.ts";

export const libcSymbols = {
  dlopen: { args: ["cstring", "i32"], returns: "ptr" }, // void *dlopen(const char *filename, int flags)
  dlerror: { args: [], returns: "ptr" }, // char *dlerror(void)
} as const satisfies SymbolTable;

/** glibc and musl on Linux: RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE. */
export const RTLD_NOW = 0x2;
export const RTLD_GLOBAL = 0x100;
export const RTLD_NODELETE = 0x1000;
