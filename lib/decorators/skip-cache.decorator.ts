import { type CustomDecorator, SetMetadata } from '@nestjs/common';
import { HERD_GUARD_SKIP } from '../herd-guard.constants.js';

/**
 * Leaves a controller or route uncached by `HerdGuardInterceptor` (health checks, metrics).
 * `@SkipCache(false)` on a handler caches it again under a `@SkipCache()` controller (the handler's
 * own setting wins).
 */
export const SkipCache = (skip = true): CustomDecorator<string> =>
  SetMetadata(HERD_GUARD_SKIP, skip);
