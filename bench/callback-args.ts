/**
 * What a callback's `user_data` argument costs to receive, by the type the backend declares it
 * with (ffi/types.ts): `usize` (a 64-bit integer, which Deno hands over as a BigInt that the
 * backend narrows to a number) against `id` (the low 32 bits: a number at once). Each line is
 * memlife's backend callback of the destructor's shape, (ptr, user_data), called n times from C on
 * the JS thread (bench/callback-args.c), round-robin, the median of `--rounds` samples, in ns a call:
 *   usize             (ptr, usize): what OpenCL's callbacks were declared with until 2026-11-29
 *   id                (ptr, id): what they are declared with now
 *   bun bench/callback-args.ts | deno run -A bench/callback-args.ts | node bench/callback-args.ts  (needs cc)
 * On this repository's 2-core VM, 2026-11-29: Deno 89 / 73 ns (medians of 9); Bun 68 / 67 and Node 76 / 75:
 * they read both the same way.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { backend } from "../src/backend.ts";
import type { CallbackDef, NativeType } from "../ffi/types.ts";

const library = join(mkdtempSync(join(tmpdir(), "memlife-callback-args-")), "libcallback-args.so");
execFileSync("cc", [
  "-O2",
  "-shared",
  "-fPIC",
  "-o",
  library,
  fileURLToPath(new URL("./callback-args.c", import.meta.url)),
]);
const lib = backend.open(library, { call_n: { args: ["fn", "i32"], returns: "void", reentrant: true } });

const rounds = Number(process.argv.find((a) => a.startsWith("--rounds="))?.slice(9) ?? 9);
const n = 200_000;
let sum = 0;
const lines: [string, ReturnType<typeof backend.callback>][] = (["usize", "id"] as NativeType[]).map((type) => {
  const def: CallbackDef = { args: ["ptr", type], returns: "void", delivery: "sync" };
  return [type, backend.callback(def, (_p: unknown, id: number) => void (sum += id))];
});
const samples = new Map<string, number[]>(lines.map(([name]) => [name, []]));
for (let r = 0; r < rounds + 1; r++) {
  for (const [name, fn] of lines) {
    const t = performance.now();
    lib.symbols.call_n(fn, n);
    // The first round warms up.
    if (r > 0) samples.get(name)!.push(((performance.now() - t) * 1e6) / n);
  }
}
console.log(`${backend.runtime}: ns a call, median of ${rounds} (min-max)`);
for (const [name, values] of samples) {
  values.sort((a, b) => a - b);
  const median = values[values.length >> 1];
  console.log(
    `  ${name.padEnd(8)} ${median.toFixed(1).padStart(7)}   (${values[0].toFixed(1)}-${values.at(-1)!.toFixed(1)})`,
  );
}
if (sum < 0) console.log(sum);
