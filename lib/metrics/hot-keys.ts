/** One key of a top-N summary with its (approximate) count. */
export interface HotKey {
  readonly key: string;
  readonly count: number;
  /** Upper bound of the over-count (0 when exact). */
  readonly error: number;
}

/** The most counters a summary may keep: memory and `top()` stay small whatever is configured. */
export const MAX_HOT_KEYS = 10_000;

/**
 * Counters with the same count, in a list ordered by count (the "stream summary"). Buckets are
 * reused: an emptied one goes to a free list with its links cleared, so no bucket is allocated per
 * count and none that left the list keeps another alive.
 */
interface Bucket {
  count: number;
  /** Its counters in the order they arrived (an intrusive list: no set per bucket). */
  first: Counter | undefined;
  last: Counter | undefined;
  /** Neighbours with the next lower and next higher count (the next free bucket, when free). */
  lower: Bucket | undefined;
  higher: Bucket | undefined;
}

interface Counter {
  key: string;
  error: number;
  bucket: Bucket;
  /** Neighbours in its bucket. Written by `#attach`/`#detach` only. */
  previous: Counter | undefined;
  next: Counter | undefined;
}

/**
 * The most frequent keys of a stream in bounded memory (Space-Saving, Metwally et al. 2005): at
 * most `capacity` counters; a new key replaces a smallest counter and inherits its count as the
 * error bound. Any key seen more than total/capacity times is guaranteed to be present. Counters
 * sit in buckets of equal count linked by count, so adding one to a key is O(1) whatever the
 * capacity, and counting a key already present allocates nothing.
 */
export class HotKeys {
  readonly #counters = new Map<string, Counter>();
  /** The bucket with the smallest count (where replacements come from). */
  #lowest: Bucket | undefined;
  /** The bucket with the largest count (where `top` starts). */
  #highest: Bucket | undefined;
  /** Emptied buckets, linked by `lower`; never more than there are counters. */
  #free: Bucket | undefined;

  constructor(readonly capacity = 64) {
    if (!Number.isInteger(capacity) || capacity < 1 || capacity > MAX_HOT_KEYS) {
      throw new RangeError(
        `capacity must be an integer from 1 to ${MAX_HOT_KEYS}, received ${capacity}`,
      );
    }
  }

  /** Counts `times` (a positive integer, default 1) occurrences of `key`. */
  add(key: string, times = 1): void {
    const counter = this.#counters.get(key);
    if (counter !== undefined) return this.#increment(counter, times);
    if (this.#counters.size < this.capacity) {
      const lowest = this.#lowest;
      const bucket = lowest?.count === 1 ? lowest : this.#link(1, undefined, lowest);
      const fresh: Counter = { key, error: 0, bucket, previous: undefined, next: undefined };
      this.#attach(fresh, bucket);
      this.#counters.set(key, fresh);
      if (times > 1) this.#increment(fresh, times - 1);
      return;
    }
    // Replace a smallest counter: the new key inherits its count as its error.
    const lowest = this.#lowest!;
    const victim = lowest.first!;
    this.#counters.delete(victim.key);
    victim.key = key;
    victim.error = lowest.count;
    this.#counters.set(key, victim);
    // The replaced counter moves to the end of its bucket, as a newcomer there.
    this.#increment(victim, times);
  }

  /** The `n` highest counts, highest first. */
  top(n: number): HotKey[] {
    const result: HotKey[] = [];
    for (
      let bucket = this.#highest;
      bucket !== undefined && result.length < n;
      bucket = bucket.lower
    ) {
      for (let counter = bucket.first; counter !== undefined; counter = counter.next) {
        if (result.length >= n) break;
        result.push({ key: counter.key, count: bucket.count, error: counter.error });
      }
    }
    return result;
  }

  clear(): void {
    this.#counters.clear();
    this.#lowest = undefined;
    this.#highest = undefined;
    this.#free = undefined;
  }

  /** Test-only view: buckets in the list, and free ones kept for reuse. */
  get buckets(): { readonly linked: number; readonly free: number } {
    let linked = 0;
    for (let bucket = this.#lowest; bucket !== undefined; bucket = bucket.higher) linked += 1;
    let free = 0;
    for (let bucket = this.#free; bucket !== undefined; bucket = bucket.lower) free += 1;
    return { linked, free };
  }

  #increment(counter: Counter, times: number): void {
    const from = counter.bucket;
    const count = from.count + times;
    // Alone in its bucket, and no bucket in between: the bucket's count goes up in place.
    if (from.first === counter && from.last === counter) {
      const higher = from.higher;
      if (higher === undefined || higher.count > count) {
        from.count = count;
        return;
      }
    }
    let below = from;
    while (below.higher !== undefined && below.higher.count <= count) below = below.higher;
    const to = below.count === count ? below : this.#link(count, below, below.higher);
    this.#detach(counter);
    this.#attach(counter, to);
    if (from.first === undefined) this.#unlink(from);
  }

  #attach(counter: Counter, bucket: Bucket): void {
    counter.bucket = bucket;
    counter.previous = bucket.last;
    counter.next = undefined;
    if (bucket.last === undefined) bucket.first = counter;
    else bucket.last.next = counter;
    bucket.last = counter;
  }

  #detach(counter: Counter): void {
    const { bucket, previous, next } = counter;
    if (previous === undefined) bucket.first = next;
    else previous.next = next;
    if (next === undefined) bucket.last = previous;
    else next.previous = previous;
    counter.previous = undefined;
    counter.next = undefined;
  }

  /** An empty bucket (a free one if any) between `lower` and `higher`. */
  #link(count: number, lower: Bucket | undefined, higher: Bucket | undefined): Bucket {
    let bucket = this.#free;
    if (bucket === undefined) {
      bucket = { count, first: undefined, last: undefined, lower, higher };
    } else {
      this.#free = bucket.lower;
      bucket.count = count;
      bucket.lower = lower;
      bucket.higher = higher;
    }
    if (lower === undefined) this.#lowest = bucket;
    else lower.higher = bucket;
    if (higher === undefined) this.#highest = bucket;
    else higher.lower = bucket;
    return bucket;
  }

  /** Takes an empty bucket out of the list; its links are cleared so it keeps no other alive. */
  #unlink(bucket: Bucket): void {
    if (bucket.lower === undefined) this.#lowest = bucket.higher;
    else bucket.lower.higher = bucket.higher;
    if (bucket.higher === undefined) this.#highest = bucket.lower;
    else bucket.higher.lower = bucket.lower;
    bucket.higher = undefined;
    bucket.first = undefined;
    bucket.last = undefined;
    bucket.lower = this.#free;
    this.#free = bucket;
  }
}
