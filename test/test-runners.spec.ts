// memlife inside a program's own test runner (deno test, deno bench): the runner decides when the
// process ends and how (its summary, its exit code). memlife ends a program with `_exit` once a
// library is open (ffi/deno.ts, "exiting with native calls in flight"); under `deno test` that ran
// at the first file's `unload`: no summary, the files after it never ran, and exit code 0 with a
// test failed. Node's and Bun's runners are checked the same way. Each runner runs as a child process.
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, test } from "vitest";
import { assert, runtime, skip } from "./helpers.ts";

const runners = fileURLToPath(new URL("./fixtures/runners/", import.meta.url));

/** Runs Deno's `subcommand` on `files` (a folder of fixtures), without colour. */
function deno(
  subcommand: string,
  files: string[],
  flags: string[] = [],
  env: Record<string, string> = {},
): Promise<{ code: number | string; out: string }> {
  return new Promise((resolve) => {
    // Through sh, with the executable in the environment: Deno's node:child_process rewrites the
    // arguments of a child that runs Deno's own executable (as if it were node).
    execFile(
      "/bin/sh",
      [
        "-c",
        'exec "$MEMLIFE_DENO" "$@"',
        "sh",
        subcommand,
        "-A",
        "--no-check",
        ...flags,
        ...files.map((f) => runners + f),
      ],
      {
        timeout: 120_000,
        env: { ...process.env, ...env, NO_COLOR: "1", DENO_NO_UPDATE_CHECK: "1", MEMLIFE_DENO: process.execPath },
      },
      (error, stdout, stderr) =>
        resolve({ code: error ? (error.signal ?? Number(error.code ?? 1)) : 0, out: `${stdout}\n${stderr}` }),
    );
  });
}

/** Runs this runtime's executable with `args`, without colour. */
function own(args: string[]): Promise<{ code: number | string; out: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      args,
      { timeout: 120_000, env: { ...process.env, NO_COLOR: "1" } },
      (error, stdout, stderr) =>
        resolve({ code: error ? (error.signal ?? Number(error.code ?? 1)) : 0, out: `${stdout}\n${stderr}` }),
    );
  });
}

describe("a program's test runner (child processes)", () => {
  test("node --test: a failing test after memlife's fails the run", async () => {
    if (runtime !== "node") skip("Node's runner");
    const { code, out } = await own(["--test", runners + "uses_memlife.node.test.ts"]);
    assert.match(out, /(#|ℹ) pass 1/, out);
    assert.match(out, /(#|ℹ) fail 1/, out);
    assert.equal(code, 1, out);
  }, 150_000);

  test("bun test: a failing test after memlife's fails the run", async () => {
    if (runtime !== "bun") skip("Bun's runner");
    const { code, out } = await own(["test", runners + "uses_memlife.bun.test.ts"]);
    assert.match(out, /1 pass/, out);
    assert.match(out, /1 fail/, out);
    assert.equal(code, 1, out);
  }, 150_000);

  test("deno test: a failing test after memlife's fails the run, the next file runs, the summary prints", async () => {
    if (runtime !== "deno") skip("Deno's runner");
    const { code, out } = await deno("test", ["uses_memlife_test.ts", "still_runs_test.ts"]);
    assert.match(out, /memlife: a destructor and a monitored commit \.\.\. ok/, out);
    assert.match(out, /a failing test after memlife's \.\.\. FAILED/, out);
    assert.match(out, /the second file still runs \.\.\. ok/, out);
    assert.match(out, /FAILED \| 2 passed \| 1 failed/, out);
    assert.equal(code, 1, out);
  }, 150_000);

  // Four files at once; MEMLIFE_PARALLEL_PART picks what each runs (test/fixtures/runners/parallel/body.ts).
  const parallel = async (part: string, runs: number) => {
    for (let run = 0; run < runs; run++) {
      const files = ["a", "b", "c", "d"].map((f) => `parallel/${f}_test.ts`);
      const { code, out } = await deno("test", files, ["--parallel"], { MEMLIFE_PARALLEL_PART: part });
      assert.equal(code, 0, `${part}, run ${run}: ${out.slice(-3000)}`);
      assert.match(out, /ok \| 20 passed \| 0 failed/, `${part}, run ${run}: ${out.slice(-3000)}`);
    }
  };

  for (
    const [part, what] of [["opencl", "SVM frees and destructor callbacks"], ["embree", "a monitored Embree commit"]]
  ) {
    test(
      `deno test --parallel: four files at once (isolates of one process), each with ${what}: all pass, 3 runs`,
      async () => {
        if (runtime !== "deno") skip("Deno's runner");
        await parallel(part, 3);
      },
      300_000,
    );
  }

  // On the H200 these crashed (SIGSEGV) in 9 runs of 14 until memlife serialized clSVMAlloc and
  // clSVMFree: NVIDIA's SVM allocator is not thread-safe (test/device/results/svm-threads-nvidia-h200-2026-11-29.txt).
  test("deno test --parallel: four files at once, OpenCL and Embree's monitor in each: all pass, 3 runs", async () => {
    if (runtime !== "deno") skip("Deno's runner");
    await parallel("", 3);
  }, 300_000);

  test("deno bench: the table prints and the run ends with 0", async () => {
    if (runtime !== "deno") skip("Deno's runner");
    const { code, out } = await deno("bench", ["uses_memlife_bench.ts"]);
    assert.match(out, /createBuffer \+ release/, out);
    assert.match(out, /iter\/s/, out);
    assert.equal(code, 0, out);
  }, 150_000);
});
