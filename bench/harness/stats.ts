/** Exact percentiles over a (small) list of samples, nearest-rank. */
export interface Summary {
  readonly count: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
}

export function summarize(samples: readonly number[]): Summary {
  if (samples.length === 0) return { count: 0, p50: 0, p99: 0, max: 0 };
  const sorted = Float64Array.from(samples).sort();
  return {
    count: sorted.length,
    p50: nearestRank(sorted, 0.5),
    p99: nearestRank(sorted, 0.99),
    max: sorted[sorted.length - 1]!,
  };
}

export function nearestRank(sorted: Float64Array, fraction: number): number {
  const rank = Math.max(1, Math.ceil(fraction * sorted.length));
  return sorted[rank - 1]!;
}

export function mean(samples: readonly number[]): number {
  return samples.length === 0 ? 0 : samples.reduce((sum, value) => sum + value, 0) / samples.length;
}
