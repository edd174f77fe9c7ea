/** One key of a top-N summary with its (approximate) count. */
export interface HotKey {
  readonly key: string;
  readonly count: number;
  /** Upper bound of the over-count (0 when exact). */
  readonly error: number;
}

interface Counter {
  count: number;
  error: number;
}

/**
 * The most frequent keys of a stream in bounded memory (Space-Saving, Metwally et al. 2005):
 * at most `capacity` counters; a new key replaces the smallest counter and inherits its count as
 * the error bound. Any key seen more than total/capacity times is guaranteed to be present.
 */
export class HotKeys {
  readonly #counters = new Map<string, Counter>();

  constructor(readonly capacity = 64) {}

  add(key: string): void {
    const counter = this.#counters.get(key);
    if (counter !== undefined) {
      counter.count += 1;
      return;
    }
    if (this.#counters.size < this.capacity) {
      this.#counters.set(key, { count: 1, error: 0 });
      return;
    }
    let smallestKey = '';
    let smallest: Counter | undefined;
    for (const [candidate, value] of this.#counters) {
      if (smallest === undefined || value.count < smallest.count) {
        smallest = value;
        smallestKey = candidate;
      }
    }
    this.#counters.delete(smallestKey);
    this.#counters.set(key, { count: smallest!.count + 1, error: smallest!.count });
  }

  /** The `n` highest counts, highest first. */
  top(n: number): HotKey[] {
    return [...this.#counters]
      .map(([key, { count, error }]) => ({ key, count, error }))
      .sort((a, b) => b.count - a.count)
      .slice(0, n);
  }

  clear(): void {
    this.#counters.clear();
  }
}
