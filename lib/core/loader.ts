import { ConfigurationError } from '../errors/configuration.error.js';

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
  /** The stale value being refreshed, when there is one. */
  readonly stale: T | undefined;
}

/** Loads the value of a key from the backend. Return `null` or `undefined` for "not found". */
export type Loader<T> = (context: LoadContext<T>) => T | Promise<T>;

export function assertLoader(loader: unknown): void {
  if (typeof loader !== 'function') {
    throw new ConfigurationError('loader', `expected a function, received ${typeof loader}`);
  }
}
