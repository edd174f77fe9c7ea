import type { CachePolicy } from '../core/policy.js';

/**
 * Options of `@Cached()`: a policy (overriding the module default field by field), and how to
 * name and tag the entry. `A` is the method's parameter list, inferred from `key` or `tags`.
 */
export interface CachedOptions<A extends unknown[] = never[]> extends CachePolicy {
  /**
   * Builds the cache key from the call's arguments (used as given, so you can invalidate it with
   * `herd.expire('user:42')`). A `function` (not an arrow) is called with the provider instance as
   * `this`, to tell apart two instances of one class. Default: `<keyPrefix>(<arguments serialised
   * deterministically>)`.
   */
  readonly key?: (...args: A) => string;
  /**
   * What default keys start with. Default `<provider>.<method>`: the provider's token when it is a
   * string or a symbol (`provide: 'EU_USERS'` gives `EU_USERS.find`), else its class name
   * (`UsersService.find`). Set it when two providers would share that name (the bootstrap fails
   * and says so) or when a minifier renames classes.
   */
  readonly keyPrefix?: string;
  /**
   * Tags stored with the entry, for `herd.expireTag()` / `herd.deleteTag()` (a function sees the
   * instance as `this`).
   */
  readonly tags?: readonly string[] | ((...args: A) => readonly string[]);
  /**
   * The cache the method goes through: the `name` of one `HerdGuardModule.forRoot({ name })` of the
   * app. Default: the unnamed cache. A name the app has no cache for fails the bootstrap.
   */
  readonly cache?: string;
}
