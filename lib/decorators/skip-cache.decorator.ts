import { type CustomDecorator, SetMetadata } from '@nestjs/common';
import { HERD_GUARD_SKIP } from '../herd-guard.constants.js';

/** Leaves a controller or route uncached by `HerdGuardInterceptor` (health checks, metrics). */
export const SkipCache = (): CustomDecorator<string> => SetMetadata(HERD_GUARD_SKIP, true);
