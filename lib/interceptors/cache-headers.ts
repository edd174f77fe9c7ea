import type { ReadResult } from '../core/herd-engine.js';

/** The response headers herd-guard sets on a cached route. */
export interface CacheHeaders {
  /** `HIT` (fresh), `STALE` (served while one refresh runs) or `MISS` (loaded for this request). */
  readonly 'X-Cache': 'HIT' | 'STALE' | 'MISS';
  /** Whole seconds since the value was loaded. */
  readonly Age: string;
  /**
   * `[private, ]max-age=<soft lifetime>, stale-while-revalidate=<hard - soft>`, in whole seconds.
   */
  readonly 'Cache-Control': string;
}

/**
 * Headers for a response served from `result` at `now`. `max-age` is the entry's freshness
 * lifetime counted from its load (soft expiry - creation, jitter included) and `Age` how long ago
 * that load was, so a downstream cache computes the same remaining freshness (`max-age - Age`) as
 * herd-guard; a `STALE` response (past its soft expiry, or invalidated before it) gets a `max-age`
 * no larger than its `Age`, so no downstream cache takes it for fresh. `stale-while-revalidate` is
 * what is left of the stale window (until hard expiry). Seconds are rounded down (never fresher
 * than the entry). `private` marks a response scoped to a user.
 */
export function cacheHeaders(
  result: Pick<ReadResult<unknown>, 'path' | 'createdAt' | 'softExpireAt' | 'hardExpireAt'>,
  now: number,
  scoped = false,
): CacheHeaders {
  const age = seconds(now - result.createdAt);
  const lifetime = seconds(result.softExpireAt - result.createdAt);
  // Stale before its soft expiry (invalidated): fresh for no longer than it has already been.
  const cut = result.path === 'stale' && age < lifetime;
  const maxAge = cut ? age : lifetime;
  const staleWindow = cut
    ? Math.max(0, seconds(result.hardExpireAt - result.createdAt) - maxAge)
    : seconds(result.hardExpireAt - result.softExpireAt);
  return {
    'X-Cache': result.path === 'fresh' ? 'HIT' : result.path === 'stale' ? 'STALE' : 'MISS',
    Age: String(age),
    'Cache-Control': `${scoped ? 'private, ' : ''}max-age=${maxAge}, stale-while-revalidate=${staleWindow}`,
  };
}

function seconds(ms: number): number {
  return Math.max(0, Math.floor(ms / 1_000));
}
