import { type CustomDecorator, SetMetadata } from '@nestjs/common';
import { HERD_GUARD_ROUTE } from '../herd-guard.constants.js';
import type { CachedRouteOptions } from '../interfaces/cached-route-options.interface.js';

/**
 * Configures how `HerdGuardInterceptor` caches the GET routes of a controller or one route
 * handler: policy, `vary` headers, ignored query parameters, tags and a per-user `scope`. It does
 * not bind the interceptor (use `@UseInterceptors(HerdGuardInterceptor)` or `APP_INTERCEPTOR`).
 */
export const CachedRoute = (options: CachedRouteOptions = {}): CustomDecorator<string> =>
  SetMetadata(HERD_GUARD_ROUTE, options);
