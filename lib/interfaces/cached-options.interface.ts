import type { CachePolicy } from '../core/policy.js';

/**
 * Options of `@Cached()`: a policy (overriding the module default field by field), and how to
 * name and tag the entry. `A` is the method's parameter list, inferred from `key` or `tags`.
 */
export interface CachedOptions<A extends unknown[] = never[]> extends CachePolicy {
  /**
   * Builds the cache key from the call's arguments (used as given, so you can invalidate it with
   * `herd.expire('user:42')`). Default: `Class.method(<arguments serialised deterministically>)`.
   */
  readonly key?: (...args: A) => string;
  /** Tags stored with the entry, for `herd.expireTag()` / `herd.deleteTag()`. */
  readonly tags?: readonly string[] | ((...args: A) => readonly string[]);
}
