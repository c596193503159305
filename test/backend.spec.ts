/**
 * The backend contract of ffi/types.ts, on libc's own functions: a 64-bit integer parameter takes
 * a number or a bigint and C receives the whole value, and a 64-bit result comes back as a number.
 * Deno's backend converts numbers to bigints itself (ffi/deno.ts, `big`), with a shortcut for the
 * int32 range, so the values on each side of 2^31 and 2^32 are the ones that matter.
 */
import { describe, test } from "vitest";
import { assert, nolib, runScript, runtime, skip } from "./helpers.ts";
import { backend } from "../src/backend.ts";
import type { SymbolTable } from "../ffi/types.ts";

const table = {
  llabs: { args: ["i64"], returns: "i64" }, // long long llabs(long long j)
  strnlen: { args: ["cstring", "usize"], returns: "usize" }, // size_t strnlen(const char *s, size_t maxlen)
} as const satisfies SymbolTable;

const libc = backend.open("libc.so.6", table).symbols;

describe("64-bit integer parameters and results", () => {
  test("a signed 64-bit number reaches C whole, on each side of 2^31, 2^32 and up to 2^53", () => {
    const values = [0, 1, -1, 7, 2 ** 31 - 1, 2 ** 31, -(2 ** 31), -(2 ** 31) - 1, 2 ** 32 + 5, -(2 ** 40) - 3];
    for (const value of [...values, Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER]) {
      assert.equal(libc.llabs(value), Math.abs(value), `llabs(${value})`);
    }
  });

  test("the same values as bigints, and numbers and bigints mixed in one loop", () => {
    for (const value of [0n, -5n, 2n ** 31n, -(2n ** 32n) - 1n, 2n ** 52n]) {
      assert.equal(libc.llabs(value), Number(value < 0n ? -value : value), `llabs(${value}n)`);
    }
    let sum = 0;
    for (let i = 0; i < 5000; i++) sum += libc.llabs(i % 3 === 0 ? BigInt(-i) : i % 3 === 1 ? -i : 2 ** 33 + i);
    let expected = 0;
    for (let i = 0; i < 5000; i++) expected += i % 3 === 2 ? 2 ** 33 + i : i;
    assert.equal(sum, expected);
  });

  test("an unsigned size over 2^32 is not cut to its low bits", () => {
    // strnlen stops at the shorter of the string and maxlen: a maxlen cut to 32 bits (2^32 + 2 -> 2)
    // would return 2.
    const text = "hello";
    for (const maxlen of [3, 2 ** 31 + 2, 2 ** 32 + 2, 2 ** 53 - 1]) {
      assert.equal(libc.strnlen(text, maxlen), Math.min(text.length, maxlen), `strnlen(maxlen ${maxlen})`);
    }
    // A hot loop, so that an optimizing compiler's form of the call is the one checked.
    let total = 0;
    for (let i = 0; i < 20000; i++) total += libc.strnlen(text, i % 2 === 0 ? 2 ** 32 + 2 : 4);
    assert.equal(total, 10000 * 5 + 10000 * 4);
  });

  test("a value repeated call after call, then another, then a bigint between numbers: each reaches C as passed", () => {
    // Deno's backend remembers each parameter's last conversion (ffi/deno.ts, `bigWithMemory`).
    const text = "hello";
    let total = 0;
    for (let i = 0; i < 20000; i++) {
      const maxlen = i % 7 === 6 ? 2n : (i >> 6) % 2 === 0 ? 2 ** 32 + 2 : 3;
      total += libc.strnlen(text, maxlen);
    }
    let expected = 0;
    for (let i = 0; i < 20000; i++) expected += i % 7 === 6 ? 2 : (i >> 6) % 2 === 0 ? 5 : 3;
    assert.equal(total, expected);
    for (const value of [-0, 0, 5, 5, 2 ** 40 + 1, 2 ** 40 + 1, -3]) {
      assert.equal(libc.llabs(value), Math.abs(value), `llabs(${value})`);
    }
  });
});

describe("pointers and addresses", () => {
  // Bun's pointers are numbers: exact to 2^53 (user-space addresses are below 2^48 or 2^57).
  const top = backend.runtime === "bun" ? 2n ** 52n : 2n ** 64n;
  const addresses = [1n, 0xfffn, 2n ** 31n, 2n ** 32n + 8n, 2n ** 47n - 16n, 2n ** 52n - 8n, 2n ** 63n + 8n, top - 8n]
    .filter((a) => a < top);

  test("NULL is null one way and 0n the other; every other address comes back whole", () => {
    assert.equal(backend.fromAddress(0n), null);
    assert.equal(backend.address(null), 0n);
    for (const address of addresses) {
      const pointer = backend.fromAddress(address);
      assert.notEqual(pointer, null, `fromAddress(${address}n)`);
      assert.equal(backend.address(pointer), address, `address(fromAddress(${address}n))`);
    }
    // A hot loop, so that an optimizing compiler's form of the calls is the one checked.
    let mismatches = 0;
    for (let i = 0; i < 20000; i++) {
      const address = addresses[i % addresses.length] ^ (BigInt(i % 7) << 4n); // below `top` still
      if (backend.address(backend.fromAddress(address)) !== address) mismatches++;
    }
    assert.equal(mismatches, 0);
  });

  test("readPointer and writePointer agree with fromAddress and address, at any index of any list", () => {
    // Bun reads and writes by 32-bit words through a cached view of the last list: lists that
    // alternate, one at an offset in its ArrayBuffer, and a hot loop check the cache and the words.
    const a = new BigUint64Array(new ArrayBuffer(8 * 4));
    const b = new BigUint64Array(new ArrayBuffer(8 * 6), 16, 3);
    for (const list of [a, b, a, b]) {
      for (let i = 0; i < list.length; i++) {
        const address = addresses[(i * 3 + list.length) % addresses.length];
        backend.writePointer(list, i, backend.fromAddress(address));
        assert.equal(list[i], address, `writePointer at ${i} of ${list.length}`);
        list[i] = address;
        assert.equal(backend.address(backend.readPointer(list, i)), address, `readPointer at ${i} of ${list.length}`);
      }
      backend.writePointer(list, list.length - 1, null);
      assert.equal(list[list.length - 1], 0n, "NULL is written 0");
      assert.equal(backend.readPointer(list, list.length - 1), null, "0 is read NULL");
    }
    assert.deepEqual([...new BigUint64Array(b.buffer, 0, 2)], [0n, 0n], "nothing before the list's offset written");
    let mismatches = 0;
    for (let i = 0; i < 20000; i++) {
      const address = addresses[i % addresses.length] ^ (BigInt(i % 7) << 4n);
      const list = i % 3 === 0 ? b : a;
      backend.writePointer(list, i % 2, backend.fromAddress(address));
      if (list[i % 2] !== address || backend.address(backend.readPointer(list, i % 2)) !== address) mismatches++;
    }
    assert.equal(mismatches, 0);
  });

  test("a pointer made from a view's address reaches that view's memory", () => {
    const view = new Uint8Array(new ArrayBuffer(16)).map((_, i) => i * 3);
    const pointer = backend.fromAddress(backend.address(backend.pointerOf(view)))!;
    assert.deepEqual([...new Uint8Array(backend.arrayBuffer(pointer, 16))], [...view]);
  });

  test("Deno converts through the prebuilt library where it is (its own conversions are ops of 55-65 ns)", async () => {
    if (backend.runtime !== "deno" || process.platform !== "linux" || !["x64", "arm64"].includes(process.arch)) return;
    const deno = await import("../ffi/deno.ts");
    assert.equal(deno.pointerConversions(), nolib ? "deno" : "library");
  });
});

describe("views of native memory", () => {
  test("on Bun, a view over 4 GiB is a RangeError that names the limit (Bun's own says 'Out of memory')", () => {
    if (backend.runtime !== "bun") return; // Deno and Node view any size
    const somewhere = backend.pointerOf(new Uint8Array(8));
    assert.throws(() => backend.arrayBuffer(somewhere, 2 ** 32 + 8), { name: "RangeError", message: /4 GiB/ });
    assert.equal(backend.arrayBuffer(somewhere, 8).byteLength, 8);
  });
});

describe("`sameThread` symbols (ffi/lane.c)", () => {
  // pthread_t pthread_self(void): which thread the call ran on.
  const threads = backend.open(
    "libc.so.6",
    {
      pthread_self: { args: [], returns: "u64", blocking: true, sameThread: true },
    } as const satisfies SymbolTable,
  );
  const self = threads.async.pthread_self;

  test("calls made one after another run on one thread, after calls at once took several", async () => {
    if (nolib && runtime !== "bun") {
      skip("no lane without the prebuilt library: the runtime's pool runs each call (README, Embree)");
    }
    // Embree's commits of small scenes ran a third longer on average when the pool thread changed
    // from one to the next (bench/lane-threads.c); Node's libuv pool and Deno's pool hand calls
    // to their threads in turn, and Bun's pool grew while it reported a call done.
    const atOnce = await Promise.all(Array.from({ length: 16 }, () => self()));
    for (const id of atOnce) assert.ok(BigInt(id as number | bigint) !== 0n, "a thread id");
    const ids = new Set<string>();
    for (let i = 0; i < 40; i++) ids.add(String(await self()));
    assert.equal(ids.size, 1, `threads: ${[...ids].join(", ")}`);
    assert.ok(!ids.has(String(threads.symbols.pthread_self())), "not the JS thread");
  });
});

describe("binding tables", () => {
  test("are fast-mode objects on V8, so that a symbol read in a hot path is a constant, not a dictionary lookup (child process)", async () => {
    // JSC (Bun) has no such flag; its table keeps a structure of its own (bun:jsc describe()).
    if (runtime === "bun") return skip("V8 only: %HasFastProperties");
    const r = await runScript(new URL("./fixtures/fast-tables.ts", import.meta.url), [], {
      env: { DENO_V8_FLAGS: "--allow-natives-syntax" },
    });
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout.trim().split("\n").at(-1)!), { symbols: true, unguarded: true, async: true });
  });
});
