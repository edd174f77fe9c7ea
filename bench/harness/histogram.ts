/**
 * A mergeable latency histogram for long runs (churn, hit path), where keeping every sample would
 * cost more than the operation being measured. Log-spaced buckets, about 1 % wide, from 0.1 µs to
 * about 100 s; percentiles are reported as the bucket's upper bound, `max` is exact.
 */
const MIN_MS = 1e-4;
const GROWTH = 1.01;
const LOG_GROWTH = Math.log(GROWTH);
const BUCKETS = Math.ceil(Math.log(1e5 / MIN_MS) / LOG_GROWTH) + 1;

export interface HistogramData {
  /** Sparse form for JSON and IPC: [bucket index, count] pairs. */
  readonly buckets: Array<[number, number]>;
  readonly count: number;
  readonly maxMs: number;
  readonly sumMs: number;
}

export class Histogram {
  /** Written by `record` and `merge` only. */
  readonly #counts = new Float64Array(BUCKETS);
  #count = 0;
  #maxMs = 0;
  #sumMs = 0;

  get count(): number {
    return this.#count;
  }

  get maxMs(): number {
    return this.#maxMs;
  }

  get meanMs(): number {
    return this.#count === 0 ? 0 : this.#sumMs / this.#count;
  }

  record(ms: number): void {
    const index =
      ms <= MIN_MS ? 0 : Math.min(BUCKETS - 1, Math.ceil(Math.log(ms / MIN_MS) / LOG_GROWTH));
    this.#counts[index]! += 1;
    this.#count += 1;
    this.#sumMs += ms;
    if (ms > this.#maxMs) this.#maxMs = ms;
  }

  /** The smallest bucket bound below which `fraction` of the samples fall (0 when empty). */
  percentile(fraction: number): number {
    if (this.#count === 0) return 0;
    const rank = Math.max(1, Math.ceil(fraction * this.#count));
    let seen = 0;
    for (let index = 0; index < BUCKETS; index++) {
      seen += this.#counts[index]!;
      if (seen >= rank) return Math.min(this.#maxMs, MIN_MS * GROWTH ** index);
    }
    return this.#maxMs;
  }

  toJSON(): HistogramData {
    const buckets: Array<[number, number]> = [];
    this.#counts.forEach((count, index) => {
      if (count > 0) buckets.push([index, count]);
    });
    return { buckets, count: this.#count, maxMs: this.#maxMs, sumMs: this.#sumMs };
  }

  static from(data: HistogramData): Histogram {
    const histogram = new Histogram();
    histogram.mergeData(data);
    return histogram;
  }

  mergeData(data: HistogramData): void {
    for (const [index, count] of data.buckets) this.#counts[index]! += count;
    this.#count += data.count;
    this.#sumMs += data.sumMs;
    if (data.maxMs > this.#maxMs) this.#maxMs = data.maxMs;
  }
}
