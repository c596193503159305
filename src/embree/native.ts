/**
 * The Embree library, loaded on first use and kept loaded for the life of the process, and the enum
 * values memlife passes to it.
 */
import type { NativeLibrary } from "../../ffi/types.ts";
import { embreeSymbols } from "../../ffi/symbols/embree.ts";
import { openLibrary } from "../library.ts";

export type EmbreeLibrary = NativeLibrary<typeof embreeSymbols>;
export type EmbreeSymbols = EmbreeLibrary["symbols"];

/**
 * enum RTCDeviceProperty (the same values in Embree 3 and 4). Frozen: every new device reads its
 * version through VERSION, and a program that wrote over it gave every later device a wrong one.
 */
export const DeviceProperty = Object.freeze(
  {
    VERSION: 0,
    VERSION_MAJOR: 1,
    VERSION_MINOR: 2,
    VERSION_PATCH: 3,
    TASKING_SYSTEM: 128,
  } as const,
);

export const GEOMETRY_TYPE_TRIANGLE = 0;
export const BUFFER_TYPE_INDEX = 0;
export const BUFFER_TYPE_VERTEX = 1;
export const FORMAT_UINT3 = 0x5003;
export const FORMAT_FLOAT3 = 0x9003;
export const INVALID_GEOMETRY_ID = 0xffffffff;

/** Which Embree loaded: its major from its symbols, the rest from the first device's RTC_DEVICE_PROPERTY_VERSION. */
export interface Version {
  readonly major: number;
  readonly minor: number;
  readonly patch: number;
  /** "3.13.5" */
  readonly string: string;
  /** The library file that was opened. */
  readonly path: string;
}

let library: EmbreeLibrary | undefined;
let major = 0;

/** The loaded library; the first call opens it ($EMBREE_LIBRARY, then Embree 4, then Embree 3). */
export function embree(): EmbreeLibrary {
  if (library !== undefined) return library;
  library = openLibrary(
    {
      name: "Embree",
      envVar: "EMBREE_LIBRARY",
      candidates: {
        linux: ["libembree4.so.4", "libembree4.so", "libembree3.so.3", "libembree3.so"],
        darwin: ["libembree4.4.dylib", "libembree4.dylib", "libembree3.3.dylib", "libembree3.dylib"],
        win32: ["embree4.dll", "embree3.dll"],
      },
      hint:
        "Install Embree: Debian 12 `apt-get install libembree3-3`, Debian 13/Ubuntu 24.04+ `apt-get install libembree4-4`, " +
        "Fedora `dnf install embree`, macOS `brew install embree`, or Intel's release archives.",
    },
    embreeSymbols,
    {
      // Embree and TBB stay mapped until the process ends: Deno and Node unload libraries at exit
      // while TBB worker threads still run in them, and segfault.
      keepLoaded: true,
    },
  );
  // Until a device tells the exact version: Embree 4 is the one with rtcGetErrorString.
  major = library.symbols.rtcGetErrorString !== undefined ? 4 : 3;
  return library;
}

/** 3 or 4: rtcIntersect1's arguments depend on it. Loads the library. */
export function embreeMajor(): number {
  embree();
  return major;
}

/**
 * Set by the first device from RTC_DEVICE_PROPERTY_VERSION (e.g. 31305 for 3.13.5). The library's
 * symbols, not this number, choose rtcIntersect1's arguments: a version the library reports that
 * disagrees with them (an error's 0, a shim's garbage) made memlife call Embree 3 with Embree 4's
 * arguments (SIGSEGV). Such a version reads as the symbols' major, and says what was reported.
 */
export function versionFrom(encoded: number): Version {
  const path = embree().path;
  // Frozen: the first device's is also `rtc.version`, which every module of the program reads.
  if (!Number.isSafeInteger(encoded) || encoded < 0 || Math.floor(encoded / 10000) !== major) {
    return Object.freeze({
      major,
      minor: 0,
      patch: 0,
      string: `${major} (the library reported version ${encoded})`,
      path,
    });
  }
  const v = { major, minor: Math.floor(encoded / 100) % 100, patch: encoded % 100 };
  return Object.freeze({ ...v, string: `${v.major}.${v.minor}.${v.patch}`, path });
}
