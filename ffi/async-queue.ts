/**
 * A cap on the asynchronous native calls a backend has running at once, with the rest waiting
 * their turn in call order. Runtime-neutral: it only sequences promises.
 *
 * Why: koffi refuses an async call past its limit (256 by default) and then fails the calls that
 * native threads make into registered callbacks, which need the same memory blocks (SIGSEGV, or
 * V8's "Cannot create a handle without a HandleScope"); a refused release is lost for good. Bun's
 * relay pool starts one thread per call it cannot place. Whatever the program does (a thousand
 * `wait()`s), the backend keeps below its cap and queues the rest.
 */
export class AsyncQueue {
  readonly limit: number;
  #running = 0;
  /** Starters waiting for a slot, oldest first, from `#head` on. */
  #waiting: (() => void)[] = [];
  #head = 0;

  constructor(limit: number) {
    if (!Number.isSafeInteger(limit) || limit < 1) {
      throw new RangeError(`AsyncQueue: limit must be a positive integer, got ${limit}`);
    }
    this.limit = limit;
  }

  /** Calls started and not yet settled. */
  get running(): number {
    return this.#running;
  }

  /** Calls waiting for a slot. */
  get queued(): number {
    return this.#waiting.length - this.#head;
  }

  /**
   * Runs `start()` once fewer than `limit` calls run, and settles like the promise it returns (a
   * synchronous throw of `start` rejects). The slot is held until that promise settled.
   */
  run<T>(start: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const go = (): void => {
        this.#running++;
        let call: Promise<T>;
        try {
          call = start();
        } catch (error) {
          call = Promise.reject(error);
        }
        call.then(
          (value) => {
            this.#done();
            resolve(value);
          },
          (error) => {
            this.#done();
            reject(error);
          },
        );
      };
      if (this.#running < this.limit && this.queued === 0) go();
      else this.#waiting.push(go);
    });
  }

  #done(): void {
    this.#running--;
    if (this.#head < this.#waiting.length) {
      const next = this.#waiting[this.#head];
      this.#waiting[this.#head++] = undefined as unknown as () => void;
      if (this.#head > 1024 && this.#head * 2 > this.#waiting.length) {
        this.#waiting = this.#waiting.slice(this.#head);
        this.#head = 0;
      }
      next();
    }
  }
}
