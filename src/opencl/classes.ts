/**
 * Classes (and two of Context's statics) that other memlife modules call but cannot import: see
 * `classes`. Not exported by mod.ts.
 */
import type { Context } from "./context.ts";
import type { CommandQueue } from "./queue.ts";
import type { SVMAllocation } from "./svm.ts";

/** What `classes` holds. */
export interface Classes {
  readonly Context: typeof Context;
  readonly CommandQueue: typeof CommandQueue;
  readonly SVMAllocation: typeof SVMAllocation;
  /**
   * Context's static `adoptChild` and `disownChild` themselves, for the hot paths (every event,
   * buffer and allocation): `cls.adopt(context)` is as short as the method call it replaced, and V8
   * inlines the static for free. Through `cls.Context[adoptChild]`, or a function wrapping it, the
   * bytecode of createBuffer and Buffer's release grew past what V8 inlines into their caller
   * (Deno's create + release 3 ns slower, bench/js-cost.ts "create memlife").
   */
  readonly adopt: (context: Context) => void;
  readonly disown: (context: Context) => void;
}

/**
 * Classes (and two statics) that modules call but cannot import, whatever an object's prototype:
 * value imports stay acyclic (test/imports.spec.ts), and context.ts imports the modules of its
 * children, queue.ts svm.ts. Each is registered once as its module loads (`register`); a module
 * reads them through a `const` alias of its own (`const cls = classes`), at each call: V8 and JSC
 * then fold them in as constants. Through a `let` assigned at load (child.ts's `parentClass`
 * before), Bun paid 8 ns more per command's event and 12-18 per SVM free (bench/js-cost.ts "event
 * memlife", "svm memlife"); through a property first set to `undefined`, as much; through the
 * imported object itself, V8 about a ns per call.
 */
export const classes: Classes = {} as Classes;

/** Adds `value` to `classes`, once (a property added, never replaced: see there). */
export function register<K extends keyof Classes>(name: K, value: Classes[K]): void {
  (classes as { -readonly [P in keyof Classes]?: Classes[P] })[name] = value;
}
