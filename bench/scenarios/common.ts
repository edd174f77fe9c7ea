/** Helpers shared by the scenario modules. */
import { type Cluster } from '../harness/cluster.js';
import { type LoaderCall } from '../harness/loader.js';
import { type PeerTtl } from '../peers/peer.js';

/** herd-guard's default TTL jitter (+0..10 %): waits for expiry must cover it. */
export const HERD_GUARD_JITTER = 0.1;

/**
 * Puts `key` (value `v1`) in every pod's cache the way traffic would: pod 0 loads it, then every
 * other pod reads it once (a hit for shared caches, a load for per-pod ones, an L1 fill for tiers).
 */
export async function prefill(
  cluster: Cluster,
  keys: readonly string[],
  ttl: PeerTtl,
  loaderMs: number,
): Promise<void> {
  const spec = { keys, ttl, loader: { delayMs: loaderMs, value: 'v1' } };
  let failed = await cluster.fill(0, spec);
  const others = Array.from({ length: cluster.size - 1 }, (_, i) => i + 1);
  failed += (await Promise.all(others.map((pod) => cluster.fill(pod, spec)))).reduce(
    (a, b) => a + b,
    0,
  );
  if (failed > 0) throw new Error(`prefill failed for ${failed} reads`);
}

/** "v1 ×3, v2 ×1997" style, in value order. */
export function describeValues(values: Record<string, number>): string {
  const entries = Object.entries(values).sort(([a], [b]) => a.localeCompare(b));
  return entries.length === 0
    ? '-'
    : entries.map(([value, count]) => `${value}×${count}`).join(', ');
}

export function describeErrors(errors: Record<string, number>): string {
  const entries = Object.entries(errors);
  return entries.length === 0
    ? ''
    : entries.map(([label, count]) => `${label}×${count}`).join(', ');
}

export function mergeCounts(all: ReadonlyArray<Record<string, number>>): Record<string, number> {
  const merged: Record<string, number> = {};
  for (const counts of all)
    for (const [label, count] of Object.entries(counts))
      merged[label] = (merged[label] ?? 0) + count;
  return merged;
}

export function total(counts: Record<string, number>): number {
  return Object.values(counts).reduce((sum, count) => sum + count, 0);
}

/** Loader calls per bucket of `bucketMs` from `startMs` over `spanMs` (epoch ms). */
export function bucketCalls(
  calls: readonly LoaderCall[],
  startMs: number,
  spanMs: number,
  bucketMs: number,
): Array<[number, number]> {
  const buckets = new Array<number>(Math.ceil(spanMs / bucketMs)).fill(0);
  for (const call of calls) {
    const index = Math.floor((call.atMs - startMs) / bucketMs);
    if (index >= 0 && index < buckets.length) buckets[index]! += 1;
  }
  return buckets.map((count, index) => [((index + 0.5) * bucketMs) / 1000, count]);
}

/** Commands sent between two `redisCommands()` snapshots. */
export function commandDelta(
  before: Record<string, number>,
  after: Record<string, number>,
): Record<string, number> {
  const delta: Record<string, number> = {};
  for (const [command, calls] of Object.entries(after)) {
    const sent = calls - (before[command] ?? 0);
    if (sent > 0) delta[command] = sent;
  }
  return delta;
}
