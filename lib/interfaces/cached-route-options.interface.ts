import type { ExecutionContext } from '@nestjs/common';
import type { CachePolicy } from '../core/policy.js';

/**
 * Options of `@CachedRoute()` on a controller or a route handler (a handler's options are laid
 * over its controller's). The policy fields override the module default field by field.
 */
export interface CachedRouteOptions extends CachePolicy {
  /**
   * Request headers the response depends on (e.g. `['accept-language']`); each value is part of the
   * key.
   */
  readonly vary?: readonly string[];
  /**
   * Query parameters left out of the key, by exact name (cache busters such as `_` or
   * `utm_source`).
   */
  readonly ignoreQuery?: readonly string[];
  /** Tags stored with the response, for `herd.expireTag()` / `herd.deleteTag()`. */
  readonly tags?: readonly string[] | ((context: ExecutionContext) => readonly string[]);
  /**
   * The user or tenant a response belongs to, from the request (e.g. `ctx => req.user.id`).
   * Scoped responses get their own entry and `Cache-Control: private`. `undefined` means shared.
   * A number is keyed by its decimal form; any other value (an object) fails the request with a
   * `KeySerializationError`, as it would put every user under one entry.
   */
  readonly scope?: (context: ExecutionContext) => string | number | undefined;
  /**
   * Share one entry between private requests (credentials, or a user a guard attached: see
   * docs/nestjs.md#private-requests) that have no scope: only for responses that are the same
   * whoever asks. Default `false`: such requests pass through uncached.
   */
  readonly shareAcrossUsers?: boolean;
  /**
   * Let the handler's own `Cache-Control` set how long its response stays fresh: `s-maxage`, else
   * `max-age`, else a future `Expires`, is the soft TTL, and `stale-while-revalidate` (if given)
   * the stale window after it (none with `must-revalidate` or `proxy-revalidate`, or with
   * `s-maxage` alone; otherwise the hard TTL is the route's, raised to the soft one when shorter).
   * A response without any of them keeps the route's policy. Default `false`.
   */
  readonly ttlFromCacheControl?: boolean;
  /**
   * The cache the route's responses go in: the `name` of one `HerdGuardModule.forRoot({ name })`
   * of the app. Default: the unnamed cache (the one `HerdGuardInterceptor` is made with).
   */
  readonly cache?: string;
  /**
   * On a POST, PUT, PATCH or DELETE handler (or its controller): whether a 2xx or 3xx answer
   * deletes the cached GET responses of its path, and of its same-origin `Location` and
   * `Content-Location`, before it is sent (RFC 9111 §4.4). Default `true`; `false` for a write
   * that leaves what the path answers unchanged (a view counter, a search by POST).
   */
  readonly invalidateOnWrite?: boolean;
}
