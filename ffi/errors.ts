/**
 * The one error class of the backends, for a native failure that is neither OpenCL's nor Embree's
 * (a thread that cannot start, a dlopen that fails). A wrong argument is a TypeError or RangeError,
 * as everywhere in memlife. No runtime module is loaded here, so src/ may re-export it.
 */
export class BackendError extends Error {
  override name = "BackendError";
  /** The C `errno`, when the failure has one. */
  readonly errno: number | undefined;
  /**
   * Whether opening any library would fail the same way (memlife's own native part failed): then
   * `openLibrary` (src/library.ts) stops at it, instead of trying the next path and reporting a
   * library that could not be loaded.
   */
  readonly whatever: boolean;
  constructor(message: string, options?: { errno?: number; cause?: unknown; whatever?: boolean }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.errno = options?.errno;
    this.whatever = options?.whatever ?? false;
  }
}
