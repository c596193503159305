/**
 * A buffer over your own memory (`hostPtr: "use"`), and destructor callbacks that say when OpenCL
 * has let go of it: only then may the memory be reused or dropped.
 *
 *   bun destructor-callback.ts
 *   deno run --allow-ffi --allow-env destructor-callback.ts
 *   node destructor-callback.ts            (Node 22.18 or newer)
 */
import { cl } from "memlife";

const ctx = cl.createContext(); // the first device of the first platform
const queue = ctx.createCommandQueue();

const host = new Float32Array(1 << 16);
const buf = ctx.createBuffer(host, { hostPtr: "use" }); // OpenCL works in `host` itself
const order: string[] = [];
buf.setDestructorCallback(() => order.push("registered first"));
buf.setDestructorCallback(() => order.push("registered second")); // runs first, as OpenCL says

await queue.writeBuffer(buf, new Float32Array(1 << 16).fill(1.5));
await queue.finish();
if (host[0] !== 1.5) throw new Error(`the buffer should live in host memory, read ${host[0]}`);

buf.release(); // the callbacks never run inside release(), even where the driver calls them there
await buf.destroyed; // settles once every destructor callback has run: `host` is ours again
host.fill(0);

queue.release();
ctx.release();
console.log(`destructor callbacks ran in this order: ${order.join(", ")}`);
if (order.join() !== "registered second,registered first") throw new Error("wrong order");
