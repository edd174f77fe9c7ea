/** A promise the test settles by hand, to sequence concurrency without sleeping. */
export interface Deferred<T> {
  readonly promise: Promise<T>;
  resolve(value: T): void;
  reject(reason: unknown): void;
}

export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (reason: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Lets every queued microtask and I/O callback run (a macrotask turn), without a timed sleep. */
export function flush(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Resolves once `condition()` is true, checking after each macrotask turn; fails after `limitMs`. */
export async function until(
  condition: () => boolean,
  limitMs = 5_000,
  what = 'condition',
): Promise<void> {
  const giveUpAt = Date.now() + limitMs;
  while (!condition()) {
    if (Date.now() > giveUpAt) throw new Error(`Timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

/** A real pause, for tests whose subject is time passing (TTL windows, backoff spacing). */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Timers currently keeping the event loop alive or scheduled (Timeout handles). */
export function activeTimers(): number {
  return process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;
}

/** Resolves once the asynchronous `condition()` holds, checking every 2 ms; fails after `limitMs`. */
export async function eventually(
  condition: () => Promise<boolean>,
  limitMs = 5_000,
  what = 'condition',
): Promise<void> {
  const giveUpAt = Date.now() + limitMs;
  while (!(await condition())) {
    if (Date.now() > giveUpAt) throw new Error(`Timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}
