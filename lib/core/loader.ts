import { ConfigurationError } from '../errors/configuration.error.js';
import type { Duration } from './duration.js';

/**
 * How a loader wants the value it is loading cached, chosen from that value (see
 * {@link LoadContext.setPolicy}). Each field overrides the call's policy for this value only.
 */
export interface LoadPolicy {
  /** Fresh for this long (> 0). */
  readonly soft?: Duration;
  /**
   * Never served after this long; at least `soft`. Default: the call's hard TTL, raised to `soft`
   * when `soft` is longer.
   */
  readonly hard?: Duration;
  /** How long a `null`/`undefined` result is kept; `0` does not store it. */
  readonly negativeTtl?: Duration;
  /** Tags added to the call's, for `expireTag()` / `deleteTag()`. */
  readonly tags?: readonly string[];
}

/** What a loader receives. */
export interface LoadContext<T = unknown> {
  readonly key: string;
  /**
   * Fires when the loader passes `loaderHardTimeout`, the cache shuts down, or (for a background
   * refresh, which nobody waits for) its lease is lost to an invalidation or a takeover, so its
   * value
   * could not be stored anyway.
   */
  readonly signal: AbortSignal;
  /**
   * The key's version this load reads under: it grows with every lease grant and invalidation of
   * the
   * key, in the store's order (never a pod's clock). Pass it to a write the loader makes (a derived
   * table, a search index) as an optimistic-concurrency guard, so a load that was overtaken cannot
   * overwrite a newer one: `UPDATE … SET …, fence = $fence WHERE key = $key AND fence < $fence`.
   * `undefined` when loading without a lease (store unreachable, or `onWaitTimeout: 'load'`).
   */
  readonly fence: number | undefined;
  /**
   * The stale value being refreshed, when there is one (for a cached route: the stored response,
   * whose `headers` hold the `etag` and `last-modified` the handler set).
   */
  readonly stale: T | undefined;
  /**
   * Chooses how the value being loaded is cached (TTLs, tags), from what was loaded; later calls
   * override earlier ones field by field (tags add up). An invalid choice throws
   * `ConfigurationError` and fails the load, even if the loader catches it: nothing is stored.
   */
  setPolicy(policy: LoadPolicy): void;
  /**
   * The value being loaded is not stored: the callers of this load get it, the next read loads
   * again (a stale value already stored stays servable until its hard expiry).
   */
  doNotCache(): void;
  /**
   * For a conditional request that found the backend's copy unchanged (an HTTP 304): returns the
   * stale value, which the load stores again as it would a new value (fresh TTLs, under the lease
   * and its fence, with its tags). Throws `ConfigurationError` (and fails the load) when there is no
   * stale value.
   */
  unchanged(): T;
}

/** Loads the value of a key from the backend. Return `null` or `undefined` for "not found". */
export type Loader<T> = (context: LoadContext<T>) => T | Promise<T>;

export function assertLoader(loader: unknown): void {
  if (typeof loader !== 'function') {
    throw new ConfigurationError('loader', `expected a function, received ${typeof loader}`);
  }
}
