// memlife inside a program that `bun build` bundled, or that `bun build --compile` made a binary:
// its own files are then not on disk beside the code (a binary's live in Bun's embedded file
// system, which Bun's TinyCC cannot read), and the C that Bun compiles at run time comes from
// ffi/bun-relay-sources.ts, a copy of it embedded in the code. Each is built here from
// test/fixtures/bundled.ts and run as a user would.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, test } from "vitest";
import { relaySources } from "../ffi/bun-relay-sources.ts";
import { assert, runtime, skip } from "./helpers.ts";

const fixture = fileURLToPath(new URL("./fixtures/bundled.ts", import.meta.url));
const temp = mkdtempSync(join(tmpdir(), "memlife-bun-bundle-"));
afterAll(() => rmSync(temp, { recursive: true, force: true }));

/** Runs `command`; its last line of stdout, parsed, or the failure with its output. */
function lastJson(command: string, args: string[]): Record<string, unknown> {
  let out: string;
  try {
    out = execFileSync(command, args, { cwd: temp, encoding: "utf8", timeout: 60_000, stdio: "pipe" });
  } catch (error) {
    const e = error as { status?: number; signal?: string; stdout?: string; stderr?: string };
    throw new Error(`${command} ${args.join(" ")}: status ${e.status} ${e.signal ?? ""}\n${e.stdout}\n${e.stderr}`);
  }
  return JSON.parse(out.trim().split("\n").at(-1)!) as Record<string, unknown>;
}

const expected = { destructors: 1, released: "ReleasedError", onFree: 1, monitored: true, bytes: true };

const bunBinary = fileURLToPath(new URL("../node_modules/.bin/bun", import.meta.url));

describe("bundled by Bun (child processes)", () => {
  test("the embedded copy of the C Bun compiles is the C in ffi/ (else: node .ci/embed-relay.ts)", () => {
    for (const name of ["bun-relay.c", "lane.c", "deferred.c", "ledger.c"]) {
      const file = readFileSync(new URL(`../ffi/${name}`, import.meta.url), "utf8");
      assert.equal(relaySources[name], file, `ffi/bun-relay-sources.ts holds another ${name}`);
    }
    assert.deepEqual(Object.keys(relaySources).sort(), ["bun-relay.c", "deferred.c", "lane.c", "ledger.c"]);
  });

  test("bun build --compile: the binary runs destructors, an SVM free and a monitored commit", () => {
    if (runtime !== "bun") skip("Bun builds it");
    const binary = join(temp, "memlife-cli");
    execFileSync(process.execPath, ["build", "--compile", fixture, "--outfile", binary], { stdio: "pipe" });
    assert.deepEqual(lastJson(binary, []), expected);
  }, 90_000);

  test("bun build --target=bun: the bundle runs the same, away from memlife's files", () => {
    if (runtime !== "bun") skip("Bun builds it");
    const out = join(temp, "bundle");
    execFileSync(process.execPath, ["build", "--target=bun", fixture, "--outdir", out], { stdio: "pipe" });
    assert.deepEqual(lastJson(process.execPath, [join(out, "bundled.js")]), expected);

    // Where that C cannot be compiled (here: no temporary folder to write it to), the error says
    // so, once: not "could not load OpenCL" for each path tried, which sent the user to install a
    // driver they had.
    try {
      execFileSync(process.execPath, [join(out, "bundled.js")], {
        cwd: temp,
        encoding: "utf8",
        stdio: "pipe",
        timeout: 60_000,
        env: { ...process.env, TMPDIR: join(temp, "no-such-folder") },
      });
      assert.fail("the bundle ran without a temporary folder");
    } catch (error) {
      const stderr = String((error as { stderr?: string }).stderr);
      assert.match(stderr, /BackendError: memlife's C for Bun \(ffi\/bun-relay\.c\) did not compile/, stderr);
      assert.doesNotMatch(stderr, /could not load OpenCL/, stderr);
    }
  }, 90_000);

  test(
    "bun build --target=node: the bundle runs on Node, without the prebuilt library beside it (the JS fallbacks)",
    () => {
      if (runtime !== "node") skip("Node runs it");
      if (!existsSync(bunBinary)) skip("no Bun in node_modules to bundle with");
      const out = join(temp, "node-bundle");
      execFileSync(bunBinary, ["build", "--target=node", "--external", "koffi", fixture, "--outdir", out], {
        stdio: "pipe",
      });
      // koffi stays a package, as a bundler leaves a native module: the project's node_modules has it.
      mkdirSync(join(out, "node_modules"));
      symlinkSync(fileURLToPath(new URL("../node_modules/koffi", import.meta.url)), join(out, "node_modules", "koffi"));
      assert.deepEqual(lastJson(process.execPath, [join(out, "bundled.js")]), expected);
    },
    90_000,
  );
});
