import { Inject } from '@nestjs/common';
import { getHerdGuardHealthToken, getHerdGuardToken } from '../herd-guard.names.js';

/**
 * Injects the `HerdGuardService` of the cache registered with `HerdGuardModule.forRoot({ name })`
 * (as `@InjectDataSource(name)` does for a named TypeORM data source). Without a name, or with
 * `'default'`, it is the unnamed cache, which a plain `cache: HerdGuardService` parameter also gets.
 *
 * ```ts
 * constructor(@InjectHerdGuard('sessions') private readonly sessions: HerdGuardService) {}
 * ```
 */
export const InjectHerdGuard = (name?: string): PropertyDecorator & ParameterDecorator =>
  Inject(getHerdGuardToken(name));

/** Injects the `HerdGuardHealthIndicator` of the cache `name` (the unnamed cache without one). */
export const InjectHerdGuardHealth = (name?: string): PropertyDecorator & ParameterDecorator =>
  Inject(getHerdGuardHealthToken(name));
