// First-run errors: what a new user sees when a Deno permission is missing or no OpenCL driver is
// installed, instead of an error that blames the wrong thing.
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, realpathSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { describe, test } from "vitest";
import { assert, runScript, runtime, skip } from "./helpers.ts";

const fixture = fileURLToPath(new URL("./fixtures/first-run.ts", import.meta.url));

interface Attempt {
  ok?: unknown;
  name?: string;
  message?: string;
  fn?: string;
  codeName?: string;
}
interface Report {
  platforms: Attempt;
  context: Attempt;
  embree: Attempt | null;
}

/** Runs the fixture on Deno with exactly `flags` (runScript always grants everything). */
function denoWith(flags: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    // Through sh, with the executable in the environment: Deno's node:child_process rewrites the
    // arguments of a child that runs Deno's own executable (as if it were node) and grants it -A.
    execFile("/bin/sh", ["-c", 'exec "$MEMLIFE_DENO" run "$@"', "sh", ...flags, fixture, "--embree"], {
      timeout: 30_000,
      env: { ...process.env, DENO_NO_UPDATE_CHECK: "1", MEMLIFE_DENO: process.execPath },
    }, (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }));
  });
}

function lastJson(stdout: string, stderr: string): Report {
  const line = stdout.trim().split("\n").pop();
  assert.ok(line, `no output; stderr: ${stderr}`);
  return JSON.parse(line) as Report;
}

describe("first-run errors", () => {
  test("Deno with no permission flag: one error naming --allow-ffi and --allow-env, not a LibraryLoadError", async () => {
    if (runtime !== "deno") skip("Deno permissions");
    const { stdout, stderr } = await denoWith([]);
    const report = lastJson(stdout, stderr);
    for (const attempt of [report.platforms, report.context, report.embree!]) {
      assert.equal(attempt.name, "NotCapable", JSON.stringify(attempt));
      assert.match(attempt.message!, /--allow-ffi/);
      assert.match(attempt.message!, /--allow-env/);
      assert.doesNotMatch(attempt.message!, /apt-get|Install/);
    }
  });

  test("Deno with --allow-env only: the error names --allow-ffi alone", async () => {
    if (runtime !== "deno") skip("Deno permissions");
    const { stdout, stderr } = await denoWith(["--allow-env"]);
    const report = lastJson(stdout, stderr);
    for (const attempt of [report.platforms, report.embree!]) {
      assert.equal(attempt.name, "NotCapable", JSON.stringify(attempt));
      assert.match(attempt.message!, /--allow-ffi/);
      assert.doesNotMatch(attempt.message!, /--allow-env/);
    }
  });

  test("Deno with --allow-ffi and --allow-env limited to memlife's variables: no permission error", async () => {
    if (runtime !== "deno") skip("Deno permissions");
    const names = "OPENCL_LIBRARY,EMBREE_LIBRARY,MEMLIFE_OPENCL_PLATFORM,MEMLIFE_OPENCL_DEVICE";
    const { stdout, stderr } = await denoWith(["--allow-ffi", `--allow-env=${names}`]);
    const report = lastJson(stdout, stderr);
    assert.ok(typeof report.platforms.ok === "number" && report.platforms.ok > 0, JSON.stringify(report));
    assert.equal(report.context.ok, "made", JSON.stringify(report));
    assert.equal(report.embree?.ok, "made", JSON.stringify(report));
  });

  test(
    "Deno with any --deny-ffi (bare library names then read as paths): libc is still found, and a program with Embree commits ends cleanly, 3 runs",
    async () => {
      if (runtime !== "deno") skip("Deno permissions");
      const absolute = (name: string, found: string[]) => {
        const given = process.env[name];
        if (given?.startsWith("/")) return given;
        return found.find((path) => existsSync(path));
      };
      const arch = process.arch === "arm64" ? "aarch64" : "x86_64";
      const opencl = absolute("OPENCL_LIBRARY", [`/lib/${arch}-linux-gnu/libOpenCL.so.1`, "/usr/lib64/libOpenCL.so.1"]);
      const embree = absolute("EMBREE_LIBRARY", [
        `/lib/${arch}-linux-gnu/libembree4.so.4`,
        `/lib/${arch}-linux-gnu/libembree3.so.3`,
      ]);
      if (opencl === undefined || embree === undefined) skip("no OpenCL or Embree library at a known absolute path");
      const script = fileURLToPath(new URL("./fixtures/deno-deny-ffi.ts", import.meta.url));
      for (let run = 0; run < 3; run++) {
        const result = await new Promise<{ code: number | string; stdout: string; stderr: string }>((resolve) => {
          execFile(
            "/bin/sh",
            [
              "-c",
              'exec "$MEMLIFE_DENO" run --allow-ffi --deny-ffi=/nonexistent --allow-env --allow-read "$1"',
              "sh",
              script,
            ],
            {
              timeout: 60_000,
              env: {
                ...process.env,
                DENO_NO_UPDATE_CHECK: "1",
                MEMLIFE_DENO: process.execPath,
                OPENCL_LIBRARY: opencl,
                EMBREE_LIBRARY: embree,
              },
            },
            (error, stdout, stderr) =>
              resolve({ code: error ? (error.signal ?? Number(error.code ?? 1)) : 0, stdout, stderr }),
          );
        });
        assert.equal(result.code, 0, `run ${run}: ${result.stderr.slice(-1500)}`);
        assert.equal(result.stdout.trim().split("\n").pop(), "ok");
      }
    },
    200_000,
  );

  test(
    "Node's permission model: with --allow-addons (koffi is an addon) it runs; without, Node's own ERR_DLOPEN_DISABLED",
    async () => {
      if (runtime !== "node") skip("Node's permission model");
      const [major, minor] = process.versions.node.split(".").map(Number);
      if (major < 23 || (major === 23 && minor < 5)) {
        skip(`--permission is stable from Node 23.5 (this is ${process.version})`);
      }
      // The folder and where its node_modules lead (a link in the suite's -nolib copies, as with pnpm).
      const root = fileURLToPath(new URL("..", import.meta.url));
      const modules = realpathSync(join(root, "node_modules"));
      const program = fileURLToPath(new URL("./fixtures/bundled.ts", import.meta.url));
      const run = (flags: string[]) =>
        new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
          execFile(process.execPath, [
            "--permission",
            `--allow-fs-read=${root}`,
            `--allow-fs-read=${modules}`,
            ...flags,
            program,
          ], {
            timeout: 60_000,
          }, (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }));
        });
      // Reading the program's own folder is all memlife asks besides the addon: dlopen is koffi's.
      const allowed = await run(["--allow-addons"]);
      assert.equal(allowed.code, 0, allowed.stderr);
      assert.deepEqual(JSON.parse(allowed.stdout.trim().split("\n").at(-1)!), {
        destructors: 1,
        released: "ReleasedError",
        onFree: 1,
        monitored: true,
        bytes: true,
      });
      const refused = await run([]);
      assert.notEqual(refused.code, 0);
      assert.match(refused.stderr, /ERR_DLOPEN_DISABLED/, refused.stderr);
    },
    90_000,
  );

  test("no OpenCL platform: getPlatforms() is empty and createContext() says why, naming the ICD variables and drivers", async () => {
    const result = await runScript(fixture, [], {
      env: { OCL_ICD_VENDORS: "/nonexistent/memlife-no-vendors", OCL_ICD_FILENAMES: "" },
    });
    assert.equal(result.code, 0, result.stderr);
    const report = lastJson(result.stdout, result.stderr);
    assert.equal(report.platforms.ok, 0, JSON.stringify(report.platforms));
    const { context } = report;
    assert.equal(context.name, "OpenCLError", JSON.stringify(context));
    assert.notEqual(context.fn, "clGetDeviceIDs", "no clGetDeviceIDs call failed: there was no platform to ask");
    assert.equal(context.fn, "clGetPlatformIDs");
    assert.match(context.message!, /no OpenCL platform/);
    assert.match(context.message!, /OCL_ICD_VENDORS/);
    assert.match(context.message!, /OCL_ICD_FILENAMES/);
    assert.match(context.message!, /pocl-opencl-icd/);
  });

  test("PoCL without a cache folder it can make: createContext() names POCL_CACHE_DIR, not a missing driver", async () => {
    // PoCL reports no device when it cannot create its kernel cache ($POCL_CACHE_DIR, else
    // $XDG_CACHE_HOME/pocl or $HOME/.cache/pocl), as for a service user whose HOME is not writable
    // (nobody's is /nonexistent). The message said to install a driver that was there. HOME is
    // /proc/self here: a folder where even root makes nothing (Deno needs HOME to be a folder).
    const { cl } = await import("../src/mod.ts");
    if (!cl.getPlatforms().some((p) => p.name === "Portable Computing Language")) skip("no PoCL platform here");
    // Set to "", either makes PoCL 3.1 abort (an assertion in pocl_cache_init_topdir); unset is the case.
    if (process.env.POCL_CACHE_DIR || process.env.XDG_CACHE_HOME) skip("POCL_CACHE_DIR or XDG_CACHE_HOME is set here");
    const result = await runScript(fixture, [], { env: { HOME: "/proc/self", MEMLIFE_OPENCL_PLATFORM: "Portable" } });
    assert.equal(result.code, 0, result.stderr);
    const { context } = lastJson(result.stdout, result.stderr);
    assert.equal(context.name, "OpenCLError", JSON.stringify(context));
    assert.equal(context.fn, "clGetDeviceIDs");
    assert.match(context.message!, /POCL_CACHE_DIR/);
    assert.match(context.message!, /HOME=\/proc\/self/);
  });
});

describe("setting up (.ci/setup)", () => {
  // README, Quick start: "Both commands install what is missing first (.ci/setup)".
  const root = fileURLToPath(new URL("..", import.meta.url));
  const setup = (path: string) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile("bash", [join(root, ".ci/setup")], { timeout: 60_000, env: { ...process.env, PATH: path } }, (
        error,
        stdout,
        stderr,
      ) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }));
    });

  test(
    "npm test and npm run bench run it first; with everything there it installs nothing; as a user it names the missing packages and the command",
    async () => {
      const scripts = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).scripts as Record<string, string>;
      for (const name of ["test", "bench"]) assert.match(scripts[name], /^bash \.ci\/setup\b/, `npm run ${name}`);
      if (process.platform !== "linux") skip(".ci/setup is for Debian and Ubuntu");
      // Run for real only where it has nothing to do: elsewhere it would install (apt-get, npm ci)
      // under the running suite. The GPU machine has Embree only as a carried copy, no apt source.
      const ldconfig = await new Promise<string>((resolve) =>
        execFile("/sbin/ldconfig", ["-p"], (_error, stdout) => resolve(String(stdout)))
      );
      const lock = join(root, "node_modules/.package-lock.json");
      const absent = [
        /libOpenCL\.so\.1 /.test(ldconfig) ? "" : "libOpenCL.so.1",
        existsSync("/etc/OpenCL/vendors/pocl.icd") ? "" : "/etc/OpenCL/vendors/pocl.icd",
        /libembree[34]\.so\.[34] /.test(ldconfig) ? "" : "a system Embree",
        existsSync(lock) && statSync(lock).mtimeMs >= statSync(join(root, "package-lock.json")).mtimeMs
          ? ""
          : "an npm ci install as fresh as package-lock.json",
      ].filter((x) => x !== "");
      if (absent.length === 0) {
        const everything = await setup(process.env.PATH ?? "");
        assert.equal(everything.code, 0, everything.stderr);
        assert.doesNotMatch(everything.stdout, /installing/, "it installed something though everything is there");
      }
      // A user (id -u is not 0) on a machine whose dynamic loader knows no library: nothing is
      // installed, and the message names every system package memlife needs.
      const dir = mkdtempSync(join(tmpdir(), "memlife-setup-"));
      try {
        writeFileSync(join(dir, "ldconfig"), "#!/bin/sh\nexit 0\n", { mode: 0o755 });
        writeFileSync(join(dir, "id"), "#!/bin/sh\necho 1000\n", { mode: 0o755 });
        const bare = await setup(`${dir}:${process.env.PATH ?? ""}`);
        assert.equal(bare.code, 1, bare.stdout + bare.stderr);
        assert.equal(bare.stdout, "", "it installed something as a user");
        assert.match(bare.stderr, /apt-get install .*ocl-icd-libopencl1/);
        assert.match(bare.stderr, /apt-get install .*libembree3-3/);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
      if (absent.length > 0) skip(`"installs nothing" needs everything there; this machine lacks ${absent.join(", ")}`);
    },
    70_000,
  );
});

/**
 * Runs the fixture on this runtime with `flags` before it, and gives its exit code, stdout and
 * stderr. Through sh, with the executable in the environment: Deno's node:child_process rewrites
 * the arguments of a child that runs Deno's own executable.
 */
function fixtureWith(flags: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const run = runtime === "deno" ? ["run", "-A", ...flags] : flags;
  return new Promise((resolve) => {
    execFile("/bin/sh", ["-c", 'exec "$MEMLIFE_RUNTIME" "$@"', "sh", ...run, fixture], {
      timeout: 30_000,
      env: { ...process.env, DENO_NO_UPDATE_CHECK: "1", MEMLIFE_RUNTIME: process.execPath },
    }, (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }));
  });
}

const koffiInstalled = existsSync(fileURLToPath(new URL("../node_modules/koffi/package.json", import.meta.url)));

/** The flags by which each runtime's own resolver maps `#ffi` to another backend's file. */
function resolvedTo(backend: "bun" | "deno" | "node", dir: string): string[] {
  const file = fileURLToPath(new URL(`../ffi/${backend}.ts`, import.meta.url));
  if (runtime === "node") return [`--conditions=${backend}`];
  if (runtime === "deno") {
    const map = join(dir, "import-map.json");
    writeFileSync(map, JSON.stringify({ imports: { "#ffi": file } }));
    return [`--import-map=${map}`];
  }
  // Bun: its "bun" condition always wins, but a tsconfig path wins over the package's imports.
  const tsconfig = join(dir, "tsconfig.json");
  writeFileSync(tsconfig, JSON.stringify({ compilerOptions: { paths: { "#ffi": [file] } } }));
  return [`--tsconfig-override=${tsconfig}`];
}

describe("backend selection", () => {
  // README, Install: "A bundler or test runner that resolves imports itself must use the runtime's
  // condition ...: otherwise memlife stops at import with an error that says so".
  test("a resolver that picks another runtime's backend gets an error naming the export condition", async () => {
    const dir = mkdtempSync(join(tmpdir(), "memlife-resolver-"));
    try {
      for (const other of (["bun", "deno", "node"] as const).filter((r) => r !== runtime)) {
        const { code, stdout, stderr } = await fixtureWith(resolvedTo(other, dir));
        const what = `the ${other} backend under ${runtime}`;
        assert.notEqual(code, 0, `${what}: ${stdout}`);
        assert.equal(stdout, "", `${what}: the program ran`);
        if (other === "node" && !koffiInstalled) {
          // koffi is the package's dependency, so an install always has it; where the suite runs
          // without it (the GPU machine's Bun and Deno passes carry no koffi), ffi/node.ts stops
          // at its import of koffi, before memlife's check: the runtime's own error, naming it.
          assert.match(stderr, /koffi/, what);
        } else if (other === "bun") {
          // Bun's backend imports bun:ffi, which Node and Deno refuse while linking, before any of
          // memlife runs: their own error, naming the scheme.
          assert.match(stderr, /scheme.*bun|bun:/i, what);
        } else {
          assert.match(stderr, new RegExp(`${other} backend was loaded under ${runtime}`), what);
          assert.match(stderr, new RegExp(`"${runtime}" export condition`), what);
        }
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
