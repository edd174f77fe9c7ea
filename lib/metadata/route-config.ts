import type { CachePolicy } from '../core/policy.js';
import { ConfigurationError } from '../errors/configuration.error.js';
import type { CachedRouteOptions } from '../interfaces/cached-route-options.interface.js';
import {
  assertOptionsObject,
  cacheOption,
  functionOption,
  stringList,
  tagsOption,
} from './option-fields.js';

/** The `@CachedRoute` options of one handler (laid over its controller's), checked and split. */
export interface RouteConfig {
  /**
   * `undefined` when the route has no policy fields; otherwise one object per handler, so the
   * engine resolves it once.
   */
  readonly policy: CachePolicy | undefined;
  /** Header names, lower case. */
  readonly vary: readonly string[];
  readonly ignoreQuery: readonly string[];
  readonly tags: CachedRouteOptions['tags'];
  readonly scope: CachedRouteOptions['scope'];
  readonly shareAcrossUsers: boolean;
  /** The handler's `Cache-Control` sets the soft TTL of its response. */
  readonly ttlFromCacheControl: boolean;
  /** The `name` of the cache the route uses; `undefined` for the default cache. */
  readonly cache?: string;
  /** A successful POST, PUT, PATCH or DELETE deletes the GET entries of its path. */
  readonly invalidateOnWrite: boolean;
}

/**
 * Merges a controller's and a handler's `@CachedRoute` options (the handler wins field by field)
 * and checks the non-policy fields. `field` names the route in errors (`@CachedRoute(Items.list)`).
 * The policy fields are checked by the engine (or `resolvePolicy`) against the module default.
 */
export function routeConfig(
  controllerOptions: CachedRouteOptions | undefined,
  handlerOptions: CachedRouteOptions | undefined,
  field: string,
): RouteConfig {
  assertOptionsObject(controllerOptions, field);
  assertOptionsObject(handlerOptions, field);
  const {
    vary,
    ignoreQuery,
    tags,
    scope,
    shareAcrossUsers,
    ttlFromCacheControl,
    cache,
    invalidateOnWrite,
    ...policy
  } = {
    ...controllerOptions,
    ...handlerOptions,
  };
  if (shareAcrossUsers !== undefined && typeof shareAcrossUsers !== 'boolean') {
    throw new ConfigurationError(
      `${field}.shareAcrossUsers`,
      `expected true or false, received ${typeof shareAcrossUsers}`,
    );
  }
  if (ttlFromCacheControl !== undefined && typeof ttlFromCacheControl !== 'boolean') {
    throw new ConfigurationError(
      `${field}.ttlFromCacheControl`,
      `expected true or false, received ${typeof ttlFromCacheControl}`,
    );
  }
  if (invalidateOnWrite !== undefined && typeof invalidateOnWrite !== 'boolean') {
    throw new ConfigurationError(
      `${field}.invalidateOnWrite`,
      `expected true or false, received ${typeof invalidateOnWrite}`,
    );
  }
  return {
    policy: Object.keys(policy).length === 0 ? undefined : policy,
    vary: stringList(vary, `${field}.vary`).map((name) => name.toLowerCase()),
    ignoreQuery: stringList(ignoreQuery, `${field}.ignoreQuery`),
    tags: tagsOption(tags, `${field}.tags`),
    scope: functionOption(scope, `${field}.scope`),
    shareAcrossUsers: shareAcrossUsers === true,
    ttlFromCacheControl: ttlFromCacheControl === true,
    cache: cacheOption(cache, `${field}.cache`),
    invalidateOnWrite: invalidateOnWrite !== false,
  };
}
