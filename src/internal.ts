/**
 * The seam between memlife's own modules: statics only other memlife modules call, keyed by
 * symbols that mod.ts does not export, so that they are not public API and can change in any
 * release. They are statics of frozen classes (`closeStatics`), never members of objects or
 * prototypes: a program finds them with `Object.getOwnPropertySymbols`, and can call them (README:
 * not defended), but not write over them. test/surface.spec.ts fails when a string-named internal
 * member reaches a public class, or a symbol-keyed one an object or a prototype.
 */

/**
 * The first argument of every constructor that takes a native handle (Buffer, Event, Kernel,
 * Platform, Device, CommandQueue, SVMMapping, rtc.Scene), which only memlife's factories pass: a
 * program's `new cl.Buffer(ctx, 1024)` (a guess at a 1024-byte buffer) made a buffer over the
 * handle 1024, and its release crashed (SIGSEGV). Never a property key: nothing gives it away.
 */
export const fromFactory: unique symbol = Symbol("memlife.factory");

/** A constructor's refusal of a call without `fromFactory` (out of line: the hot constructors stay small). */
export function notByNew(what: string, factoryName: string): never {
  throw new TypeError(`${what} is made by ${factoryName}, not by new`);
}

/**
 * Called in a static block by every class that has members keyed by these symbols, after them:
 * `Object.getOwnPropertySymbols` finds them, and written over they would hand C what the program
 * chose (test/fixtures/robust-internals.ts). The prototype stays open: its public methods are the
 * program's to wrap, and memlife reads its objects' state through their classes.
 */
export function closeStatics(c: abstract new (...args: never[]) => unknown): void {
  Object.freeze(c);
}

/**
 * Buffer, SVMAllocation, Event, Kernel (static): whether a value is one itself, not a Proxy of one.
 * A Proxy passes `instanceof`, and its traps would run the program's code at each read memlife
 * makes of it, also after a call took its native handles; a private field is the brand it lacks.
 */
export const genuine: unique symbol = Symbol("memlife.genuine");
/** Device (static): a list of devices, each element read once and brand-checked. */
export const deviceList: unique symbol = Symbol("memlife.deviceList");
/**
 * Context (static, as the four below, called through opencl/classes.ts, whatever the context's
 * prototype): the cl_context for children, valid until the last child let go, even after release().
 */
export const nativeHandle: unique symbol = Symbol("memlife.nativeHandle");
/**
 * Context (static): a child (buffer, queue, event, SVM allocation, program, kernel) now depends on
 * it. Children call this and `disownChild` as `cls.adopt` and `cls.disown` (opencl/classes.ts).
 */
export const adoptChild: unique symbol = Symbol("memlife.adoptChild");
/** Context (static): a child released its native reference. */
export const disownChild: unique symbol = Symbol("memlife.disownChild");
/** Context (static): its live handle if its devices were already found to support these SVM kinds and this size. */
export const svmChecked: unique symbol = Symbol("memlife.svmChecked");
/** Context (static): its devices support these SVM kinds up to a size; they will not change. */
export const svmPassed: unique symbol = Symbol("memlife.svmPassed");
/**
 * Buffer (static): the cl_mem for a command, refused once a `hostPtr: "use"` buffer's memory was
 * transferred.
 */
export const commandHandle: unique symbol = Symbol("memlife.commandHandle");
/** Buffer (static): its size in bytes, from the private field (an own `size` may lie). */
export const sizeOf: unique symbol = Symbol("memlife.sizeOf");
/** SVMAllocation (static): the SVM pointer of a live allocation. */
export const svmPointer: unique symbol = Symbol("memlife.svmPointer");
/** SVMAllocation (static): whether it is still the program's, neither released nor handed to a free. */
export const holdsMemory: unique symbol = Symbol("memlife.holdsMemory");
/** SVMAllocation (static): its size in bytes, from the private field (an own `size` may lie). */
export const svmSize: unique symbol = Symbol("memlife.svmSize");
/** SVMAllocation (static): the SVM pointer as an address, from the private field (an own `address` may lie). */
export const svmAddress: unique symbol = Symbol("memlife.svmAddress");
/** SVMAllocation: hands the pointer to a free command; the allocation is unusable afterwards. */
export const surrender: unique symbol = Symbol("memlife.surrender");
/** SVMAllocation: a free command that took the pointer did not happen; the allocation is the program's again. */
export const reclaim: unique symbol = Symbol("memlife.reclaim");
/**
 * SVMAllocation (static): an enqueued command uses it (`unuse` when that command completed). Static,
 * as the other members memlife calls on an object it did not make in that call: a program may give
 * the object another prototype, and a call through it then threw after the command was enqueued.
 */
export const useSVM: unique symbol = Symbol("memlife.useSVM");
export const unuseSVM: unique symbol = Symbol("memlife.unuseSVM");
/** SVMAllocation (static): the commands counted by `useSVM` not yet seen complete (`commandsInFlight`). */
export const usesOf: unique symbol = Symbol("memlife.usesOf");
/** CommandQueue (static, as those below): wraps the cl_event the enqueue call just wrote. */
export const newCommand: unique symbol = Symbol("memlife.newCommand");
/** Context: a FailureGuard's hold on a cl_event (event.ts), which keeps the context as a child does. */
export const guardHold: unique symbol = Symbol("memlife.guardHold");
/** A queue's wait list for a command about to be enqueued on it (CommandQueue `#waitList`). */
export const waitListOf: unique symbol = Symbol("memlife.waitListOf");
/** CommandQueue: keeps what a command uses alive until it completed. */
export const pinCommand: unique symbol = Symbol("memlife.pinCommand");
/**
 * CommandQueue: itself for an `onFree` callback, or, once the program released it, a queue object
 * of its own on the same native queue (which the free command still holds, as in C).
 */
export const callbackQueue: unique symbol = Symbol("memlife.callbackQueue");
/** CommandQueue: every command up to a number completed. */
export const completedThrough: unique symbol = Symbol("memlife.completedThrough");
/**
 * CommandQueue (static): `retain()` and `release()` through the class, for a mapping's reference
 * to its queue (an own `retain` or `release` must not stand in for them, nor another prototype).
 */
export const retainOf: unique symbol = Symbol("memlife.retainOf");
export const releaseOf: unique symbol = Symbol("memlife.releaseOf");
/**
 * Kernel (static): RangeError unless its local memory (CL_KERNEL_LOCAL_MEM_SIZE: its own __local
 * variables and its cl.local() arguments together) fits a device's.
 */
export const localMemoryFits: unique symbol = Symbol("memlife.localMemoryFits");
/**
 * Kernel (static): OpenCLError CL_INVALID_PROGRAM_EXECUTABLE unless its program was built for a
 * device (PoCL aborted the process in the enqueue).
 */
export const executableOn: unique symbol = Symbol("memlife.executableOn");
/** Kernel: the SVM allocations an enqueue of it uses; ReleasedError for a released argument. */
export const commandUses: unique symbol = Symbol("memlife.commandUses");
/** rtc.Device (static): its DeviceState, which scenes share. */
export const deviceState: unique symbol = Symbol("memlife.deviceState");
/**
 * Buffer, SVMAllocation, Event, CommandQueue, Program, Kernel: `static [contextOf](x)`, the context
 * from the private field of an object the caller brand-checked. `x.context` is a getter a program
 * can shadow with an own property (a "moved" allocation passed the context check: PoCL aborted).
 */
export const contextOf: unique symbol = Symbol("memlife.contextOf");
/**
 * Event, Program, Kernel, CommandQueue, Context: `static [handleOf](x)`, the live handle from the
 * private field of an object the caller brand-checked, whatever its prototype (ReleasedError once
 * released). Device: its cl_device_id (`unsafeHandle` is a getter of a prototype the program can
 * redefine).
 */
export const handleOf: unique symbol = Symbol("memlife.handleOf");
