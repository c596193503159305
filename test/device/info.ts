/**
 * What this machine offers memlife, in the current runtime (used by test/device/run.sh):
 *
 *   bun test/device/info.ts [--require-platform=SELECTOR]
 *   deno run -A test/device/info.ts ... | node test/device/info.ts ...
 *
 * Prints the runtime, every OpenCL platform and device (version, SVM capabilities), the device
 * `cl.createContext()` picks under the current MEMLIFE_OPENCL_PLATFORM / _DEVICE, and the Embree
 * that loads (EMBREE_LIBRARY, else the search). With --require-platform, exits 3 when no platform
 * matches SELECTOR (an index or a case-insensitive name substring, like MEMLIFE_OPENCL_PLATFORM),
 * so run.sh can skip a pass with its reason instead of failing every test.
 */
import { existsSync, readFileSync } from "node:fs";
import process from "node:process";
import { cl, rtc, runtime } from "../../src/mod.ts";

const g = globalThis as { Bun?: { version: string }; Deno?: { version: { deno: string } } };
const version = g.Bun?.version ?? g.Deno?.version.deno ?? process.versions.node;
console.log(`runtime: ${runtime} ${version}`);

const required = process.argv.find((a) => a.startsWith("--require-platform="))?.slice("--require-platform=".length);
let found = required === undefined;

try {
  const platforms = cl.getPlatforms();
  // Which ICD loader dlopen picked matters: they read OCL_ICD_VENDORS / OCL_ICD_FILENAMES differently.
  const loaders = existsSync("/proc/self/maps")
    ? [
      ...new Set(
        readFileSync("/proc/self/maps", "utf8").split("\n").map((l) => l.split(/\s+/)[5] ?? "").filter((f) =>
          /libOpenCL\.so/.test(f)
        ),
      ),
    ]
    : [];
  console.log(
    `OpenCL: ${platforms.length} platform(s) through ${loaders.join(", ") || "an ICD loader"} [OPENCL_LIBRARY=${
      process.env.OPENCL_LIBRARY ?? ""
    }]`,
  );
  platforms.forEach((p, i) => {
    const match = required !== undefined &&
      (/^\d+$/.test(required) ? Number(required) === i : p.name.toLowerCase().includes(required.toLowerCase()));
    if (match) found = true;
    console.log(`  ${i}: ${p.name} | ${p.vendor} | ${p.version}${match ? "   <- --require-platform" : ""}`);
    try {
      p.getDevices().forEach((d, j) => {
        console.log(`     ${j}: ${d.name} | ${d.version} | driver ${d.driverVersion} | svm ${JSON.stringify(d.svm)}`);
      });
    } catch (error) {
      console.log(`     devices: ${error instanceof Error ? error.message : String(error)}`);
    }
  });
  try {
    const d = cl.defaultDevice();
    console.log(
      `createContext() picks: ${d.name} (${d.platform.name}) ` +
        `[MEMLIFE_OPENCL_PLATFORM=${process.env.MEMLIFE_OPENCL_PLATFORM ?? ""} MEMLIFE_OPENCL_DEVICE=${
          process.env.MEMLIFE_OPENCL_DEVICE ?? ""
        }]`,
    );
  } catch (error) {
    console.log(`createContext() would throw: ${error instanceof Error ? error.message : String(error)}`);
  }
} catch (error) {
  console.log(`OpenCL: ${error instanceof Error ? error.message : String(error)}`);
}

try {
  const v = typeof rtc.load === "function" ? rtc.load() : (rtc.newDevice().release(), rtc.version);
  console.log(
    `Embree: ${v ? `${v.string} from ${v.path}` : "loaded (version unknown)"} [EMBREE_LIBRARY=${
      process.env.EMBREE_LIBRARY ?? ""
    }]`,
  );
} catch (error) {
  console.log(`Embree: ${error instanceof Error ? error.message : String(error)}`);
}

if (!found) {
  console.log(`no OpenCL platform matches "${required}"`);
  process.exit(3);
}
process.exit(0);
