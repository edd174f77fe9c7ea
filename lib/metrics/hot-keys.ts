/** One key of a top-N summary with its (approximate) count. */
export interface HotKey {
  readonly key: string;
  readonly count: number;
  /** Upper bound of the over-count (0 when exact). */
  readonly error: number;
}

/** The most counters a summary may keep: memory and `top()` stay small whatever is configured. */
export const MAX_HOT_KEYS = 10_000;

/** Counters with the same count, in a list ordered by count (the "stream summary"). */
interface Bucket {
  readonly count: number;
  readonly counters: Set<Counter>;
  /** Neighbours with the next lower and next higher count. Written by `#link`/`#unlink` only. */
  lower: Bucket | undefined;
  higher: Bucket | undefined;
}

interface Counter {
  key: string;
  error: number;
  bucket: Bucket;
}

/**
 * The most frequent keys of a stream in bounded memory (Space-Saving, Metwally et al. 2005): at
 * most `capacity` counters; a new key replaces a smallest counter and inherits its count as the
 * error bound. Any key seen more than total/capacity times is guaranteed to be present. Counters
 * sit in buckets of equal count linked by count, so each `add` is O(1) whatever the capacity.
 */
export class HotKeys {
  readonly #counters = new Map<string, Counter>();
  /** The bucket with the smallest count (where replacements come from). */
  #lowest: Bucket | undefined;
  /** The bucket with the largest count (where `top` starts). */
  #highest: Bucket | undefined;

  constructor(readonly capacity = 64) {
    if (!Number.isInteger(capacity) || capacity < 1 || capacity > MAX_HOT_KEYS) {
      throw new RangeError(
        `capacity must be an integer from 1 to ${MAX_HOT_KEYS}, received ${capacity}`,
      );
    }
  }

  add(key: string): void {
    const counter = this.#counters.get(key);
    if (counter !== undefined) return this.#increment(counter);
    if (this.#counters.size < this.capacity) {
      const bucket =
        this.#lowest?.count === 1 ? this.#lowest : this.#link(1, undefined, this.#lowest);
      const fresh: Counter = { key, error: 0, bucket };
      bucket.counters.add(fresh);
      this.#counters.set(key, fresh);
      return;
    }
    // Replace a smallest counter: the new key inherits its count as its error.
    const lowest = this.#lowest!;
    const victim = lowest.counters.values().next().value as Counter;
    this.#counters.delete(victim.key);
    victim.key = key;
    victim.error = lowest.count;
    this.#counters.set(key, victim);
    this.#increment(victim);
  }

  /** The `n` highest counts, highest first. */
  top(n: number): HotKey[] {
    const result: HotKey[] = [];
    for (
      let bucket = this.#highest;
      bucket !== undefined && result.length < n;
      bucket = bucket.lower
    ) {
      for (const { key, error } of bucket.counters) {
        if (result.length >= n) break;
        result.push({ key, count: bucket.count, error });
      }
    }
    return result;
  }

  clear(): void {
    this.#counters.clear();
    this.#lowest = undefined;
    this.#highest = undefined;
  }

  #increment(counter: Counter): void {
    const from = counter.bucket;
    const next = from.higher;
    const to = next?.count === from.count + 1 ? next : this.#link(from.count + 1, from, next);
    from.counters.delete(counter);
    to.counters.add(counter);
    counter.bucket = to;
    if (from.counters.size === 0) this.#unlink(from);
  }

  /** A new empty bucket between `lower` and `higher`. */
  #link(count: number, lower: Bucket | undefined, higher: Bucket | undefined): Bucket {
    const bucket: Bucket = { count, counters: new Set(), lower, higher };
    if (lower === undefined) this.#lowest = bucket;
    else lower.higher = bucket;
    if (higher === undefined) this.#highest = bucket;
    else higher.lower = bucket;
    return bucket;
  }

  #unlink(bucket: Bucket): void {
    if (bucket.lower === undefined) this.#lowest = bucket.higher;
    else bucket.lower.higher = bucket.higher;
    if (bucket.higher === undefined) this.#highest = bucket.lower;
    else bucket.higher.lower = bucket.lower;
  }
}
