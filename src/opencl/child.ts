/**
 * The lifecycle Program and Kernel share: one reference-counted native handle, a context that
 * waits for it (`adopt`/`disown`), the safety net, and `retain`/`release`/dispose/`unsafeHandle`
 * written once. Context and CommandQueue release off the JS thread and Buffer, SVMAllocation and
 * Event (one per command) have tuned hot paths: they keep their own.
 */
import type { Pointer } from "../../ffi/types.ts";
import { finalizerState, SafetyNet } from "../callbacks.ts";
import { ReleasedError } from "../errors.ts";
import { classes } from "./classes.ts";
import { closeStatics, contextOf, fromFactory, handleOf, notByNew } from "../internal.ts";
import { check } from "./native.ts";
import type { Context } from "./context.ts";

/** What differs between the kinds of child: names, and the native retain and release. */
export interface ChildKind {
  /** As ReleasedError names it, e.g. "Event". */
  readonly name: string;
  readonly retainFn: string;
  readonly releaseFn: string;
  retain(handle: Pointer): number;
  release(handle: Pointer): number;
  /**
   * Called once, when the last reference goes: drop what only a live object needs. Through the
   * kind, not a method: an object given another prototype is released all the same.
   */
  lastRelease?(child: ContextChild): void;
}

// Classes this module cannot import (see classes.ts), read at each call: a child
// adopts and disowns its context through its class, whatever the context's prototype (one the
// program gave another had a child's release throw TypeError after the native release, and the
// context was never released).
const cls = classes;

/** What a child's safety net needs to release it: never the child itself. */
export interface ChildHeld {
  handle: Pointer;
  context: Context;
  refs: number;
}

/** A kind of child, with the safety net that releases the ones the program forgot. */
export type KindOf<T extends object> = ChildKind & { readonly net: SafetyNet<ChildHeld, T> };

/** A kind of child; `stateOf` is its class's [finalizerState] (see SafetyNet). */
export function childKind<T extends object>(kind: ChildKind, stateOf: (child: T) => ChildHeld | undefined): KindOf<T> {
  const net = new SafetyNet<ChildHeld, T>(({ handle, context, refs }) => {
    for (let i = 0; i < refs; i++) kind.release(handle);
    cls.disown(context);
  }, stateOf);
  return Object.freeze({ ...kind, net });
}

export class ContextChild {
  #handle: Pointer | null;
  #refs = 1;
  readonly #kind: KindOf<ContextChild>;
  readonly #context: Context;

  /** @internal for Program and Kernel: reachable as `Object.getPrototypeOf(cl.Program)`, so it takes the token too. */
  constructor(made: typeof fromFactory, handle: Pointer, context: Context, kind: KindOf<ContextChild>) {
    if (made !== fromFactory) notByNew("A program or kernel", "ctx.createProgram() or program.createKernel()");
    this.#handle = handle;
    this.#kind = kind;
    this.#context = context;
    cls.adopt(context);
    kind.net.add(this);
  }

  /** @internal What the safety net registers (see `finalizerState`). */
  static [finalizerState](child: ContextChild): ChildHeld | undefined {
    if (child.#handle === null) return undefined;
    return { handle: child.#handle, context: child.#context, refs: child.#refs };
  }

  /** The context it belongs to. */
  get context(): Context {
    return this.#context;
  }

  /** @internal The context from the private field (see `contextOf`). */
  static [contextOf](x: ContextChild): Context {
    return x.#context;
  }

  get alive(): boolean {
    return this.#handle !== null;
  }

  /** @internal The live handle through the class (see `handleOf`). */
  static [handleOf](child: ContextChild): Pointer {
    if (child.#handle === null) throw new ReleasedError(child.#kind.name);
    return child.#handle;
  }

  /** Adds a native reference; each `retain()` needs its own `release()`. */
  retain(): this {
    const kind = this.#kind;
    check(kind.retainFn, kind.retain(ContextChild[handleOf](this)));
    this.#refs++;
    kind.net.renew(this);
    return this;
  }

  /** Drops a reference; after the last one the object can't be used. A further call does nothing. */
  release(): void {
    const handle = this.#handle;
    if (handle === null) return;
    const kind = this.#kind;
    const last = --this.#refs === 0;
    if (last) {
      this.#handle = null;
      kind.lastRelease?.(this);
      kind.net.remove(this);
    } else kind.net.renew(this);
    const status = kind.release(handle);
    if (last) cls.disown(this.#context);
    check(kind.releaseFn, status);
  }

  [Symbol.dispose](): void {
    this.release();
  }

  /** The raw handle (cl_event, cl_program, cl_kernel). Unsafe: invalid after release. */
  get unsafeHandle(): Pointer {
    return ContextChild[handleOf](this);
  }

  static {
    closeStatics(this);
  }
}
