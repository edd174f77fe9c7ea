/** Metadata key of `@Cached()` options on a provider method. */
export const HERD_GUARD_CACHED = 'herd-guard:cached';
/** Metadata key of `@CachedRoute()` options on a controller or route handler. */
export const HERD_GUARD_ROUTE = 'herd-guard:route';
/**
 * Metadata key set by `@SkipCache(skip)`: `true` or `false`, the handler's over its controller's.
 */
export const HERD_GUARD_SKIP = 'herd-guard:skip';

/** Injection token of the engine behind `HerdGuardService` (one per module instance). */
export const HERD_GUARD_ENGINE = Symbol('herd-guard.engine');
/** Injection token of what the module opened (engine, store), closed on shutdown. Internal. */
export const HERD_GUARD_RESOURCES = Symbol('herd-guard.resources');
/**
 * Injection token of the module's default policy (`options.policy`, `undefined` when not set),
 * which
 * `@Cached` and `@CachedRoute` options are checked against at start. Internal.
 */
export const HERD_GUARD_DEFAULT_POLICY = Symbol('herd-guard.default-policy');
/** Injection token of the hot-key tracker of one module instance (absent when `hotKeys: 0`). */
export const HERD_GUARD_HOT_KEYS = Symbol('herd-guard.hot-keys');
/**
 * Injection token of the request headers one module instance's `credentialHeaders` names, lower
 * case. Internal.
 */
export const HERD_GUARD_CREDENTIAL_HEADERS = Symbol('herd-guard.credential-headers');
/** Injection token of the name of one module instance's cache (`default` without a name). */
export const HERD_GUARD_CACHE_NAME = Symbol('herd-guard.cache-name');
/**
 * Injection token of one module instance's `HerdGuardService`, whatever its cache's name: what the
 * module's own providers inject. Internal.
 */
export const HERD_GUARD_SERVICE = Symbol('herd-guard.service');
