// Several JS isolates in ONE process, each using memlife as the main thread of a program would:
// `deno serve --parallel` runs one isolate per thread (test-runners.spec.ts has `deno test
// --parallel`). The prebuilt library's relay, ledger and lanes are the process's: the isolates took
// them over in turn, and one isolate's callbacks reached another's handlers (requests hung, the
// server stopped answering). Each server runs as a child process.
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, test } from "vitest";
import { assert, runtime, skip } from "./helpers.ts";

const server = fileURLToPath(new URL("./fixtures/serve-parallel.ts", import.meta.url));

describe("several isolates of one process (child processes)", () => {
  test(
    "deno serve --parallel: 200 requests, 8 at a time, each with onFree, a destructor and a monitored commit, all answered right",
    async () => {
      if (runtime !== "deno") skip("Deno's server");
      // Through sh, with the executable in the environment: Deno's node:child_process rewrites the
      // arguments of a child that runs Deno's own executable (as if it were node).
      const child = spawn("/bin/sh", [
        "-c",
        'exec "$MEMLIFE_DENO" serve -A --no-check --parallel --port 0 "$1"',
        "sh",
        server,
      ], {
        env: {
          ...process.env,
          NO_COLOR: "1",
          DENO_NO_UPDATE_CHECK: "1",
          DENO_JOBS: "2",
          MEMLIFE_DENO: process.execPath,
        },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let output = "";
      try {
        const port = await new Promise<number>((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error(`no port after 30 s: ${output}`)), 30_000);
          const read = (chunk: Buffer) => {
            output += chunk.toString();
            const found = /Listening on http:\/\/[^:]+:(\d+)/.exec(output);
            if (found) {
              clearTimeout(timer);
              resolve(Number(found[1]));
            }
          };
          child.stdout!.on("data", read);
          child.stderr!.on("data", read);
          child.on("exit", (code, signal) => reject(new Error(`the server ended (${code ?? signal}): ${output}`)));
        });
        const answers: string[] = [];
        let next = 0;
        const worker = async () => {
          while (next < 200) {
            next++;
            const response = await fetch(`http://127.0.0.1:${port}/`, { signal: AbortSignal.timeout(20_000) });
            answers.push(await response.text());
          }
        };
        await Promise.all(Array.from({ length: 8 }, worker));
        const wrong = answers.filter((a) => a !== "1 1 true");
        assert.equal(
          wrong.length,
          0,
          `${wrong.length} wrong answers, e.g. ${JSON.stringify(wrong.slice(0, 3))}\n${output}`,
        );
        assert.equal(answers.length, 200);
        assert.equal(child.exitCode, null, `the server ended: ${output}`);
      } finally {
        child.kill("SIGKILL");
      }
    },
    240_000,
  );
});
