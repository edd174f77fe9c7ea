import { WaitAbortedError } from '../errors/wait-aborted.error.js';
import { WaitTimeoutError } from '../errors/wait-timeout.error.js';

/**
 * The outcome of {@link SingleFlight.do}: the value and whether this caller joined a run it did not
 * start.
 */
export interface FlightResult<T> {
  readonly value: T;
  readonly shared: boolean;
}

/** Limits on one caller's wait. Giving up never cancels the shared run for the other callers. */
export interface WaitOptions {
  readonly signal?: AbortSignal;
  readonly timeoutMs?: number;
}

interface Call {
  /** Settled once by the run; every caller of the key awaits it. */
  readonly promise: Promise<unknown>;
}

/**
 * Request coalescing within one process: at most one run per key at a time; concurrent callers
 * of the same key share its result or its error.
 */
export class SingleFlight {
  /** Written by `do` (insert) and by the run's completion or `forget` (delete); nothing else. */
  readonly #calls = new Map<string, Call>();
  /** Timers and abort listeners currently armed for callers that limited their wait. */
  #armedWaits = 0;

  /** Keys with a run in progress. */
  get size(): number {
    return this.#calls.size;
  }

  /** Waits with a timeout or signal still armed (0 when nothing waits). */
  get armedWaits(): number {
    return this.#armedWaits;
  }

  has(key: string): boolean {
    return this.#calls.has(key);
  }

  /**
   * Runs `fn` for `key` unless a run is in progress, in which case this caller joins it. A
   * synchronous throw from `fn` is delivered like a rejection.
   */
  do<T>(key: string, fn: () => Promise<T> | T, options?: WaitOptions): Promise<FlightResult<T>> {
    const shared = this.#calls.has(key);
    return this.run(key, fn, options).then((value) => ({ value, shared }));
  }

  /**
   * {@link do} without the `shared` flag: the outcome itself (callers without limits share one
   * promise).
   */
  run<T>(key: string, fn: () => Promise<T> | T, options?: WaitOptions): Promise<T> {
    const call = this.#calls.get(key) ?? this.#start(key, fn);
    const outcome = call.promise as Promise<T>;
    if (options === undefined || (options.signal === undefined && options.timeoutMs === undefined))
      return outcome;
    return this.#limitWait(key, outcome, options);
  }

  /**
   * Stops sharing the run in progress for `key`: the next `do` starts a new run. Callers already
   * waiting still get the old run's outcome.
   */
  forget(key: string): void {
    this.#calls.delete(key);
  }

  #start<T>(key: string, fn: () => Promise<T> | T): Call {
    let settle!: { resolve: (value: T) => void; reject: (reason: unknown) => void };
    const promise = new Promise<T>((resolve, reject) => {
      settle = { resolve, reject };
    });
    const call: Call = { promise };
    // Registered before fn runs, so a synchronous throw still finds the entry to remove.
    this.#calls.set(key, call);
    // Registered before any caller's handler, so callers resume with the entry already gone.
    const cleanup = (): void => {
      if (this.#calls.get(key) === call) this.#calls.delete(key);
    };
    promise.then(cleanup, cleanup);
    try {
      Promise.resolve(fn()).then(settle.resolve, settle.reject);
    } catch (error) {
      settle.reject(error);
    }
    return call;
  }

  #limitWait<T>(key: string, outcome: Promise<T>, { signal, timeoutMs }: WaitOptions): Promise<T> {
    if (signal?.aborted === true) return Promise.reject(new WaitAbortedError(key, signal.reason));
    return new Promise<T>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      let done = false;
      // Whichever comes first (outcome, timeout, abort) settles the wait and disarms the others.
      const finish = (settle: () => void): void => {
        if (done) return;
        done = true;
        if (timer !== undefined) clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.#armedWaits -= 1;
        settle();
      };
      const onAbort = (): void => finish(() => reject(new WaitAbortedError(key, signal?.reason)));
      this.#armedWaits += 1;
      if (timeoutMs !== undefined) {
        timer = setTimeout(
          () => finish(() => reject(new WaitTimeoutError(key, timeoutMs))),
          timeoutMs,
        );
      }
      signal?.addEventListener('abort', onAbort, { once: true });
      outcome.then(
        (value) => finish(() => resolve(value)),
        (error: unknown) => finish(() => reject(error)),
      );
    });
  }
}
