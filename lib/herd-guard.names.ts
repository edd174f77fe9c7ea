import { ConfigurationError } from './errors/configuration.error.js';
import { HerdGuardHealthIndicator } from './health/herd-guard.health.js';
import { HerdGuardService } from './herd-guard.service.js';

/**
 * The name of the cache `HerdGuardModule.forRoot()` registers without a `name` (as
 * `@nestjs/typeorm` calls its unnamed data source `default`): `name: 'default'` means that cache.
 */
export const DEFAULT_CACHE_NAME = 'default';

/** What a cache name may hold: it becomes part of injection tokens, logs and a metric label. */
const CACHE_NAME_PATTERN = /^[A-Za-z0-9_.:-]{1,64}$/;

/**
 * Checks a module's `name` (undefined: the default cache) and returns the cache's name.
 *
 * @throws {ConfigurationError} `name` is not 1-64 characters from A-Z a-z 0-9 . _ : -.
 */
export function cacheName(name: unknown): string {
  if (name === undefined) return DEFAULT_CACHE_NAME;
  if (typeof name === 'string' && CACHE_NAME_PATTERN.test(name)) return name;
  const received = typeof name === 'string' ? JSON.stringify(name) : typeof name;
  throw new ConfigurationError(
    'name',
    `use 1-64 characters from A-Z a-z 0-9 . _ : -, received ${received}`,
  );
}

/**
 * The injection token of the {@link HerdGuardService} of the cache `name`: the class itself for the
 * default cache, so `constructor(cache: HerdGuardService)` keeps working. For `moduleRef.get()`,
 * `overrideProvider()` and factory providers' `inject`; in constructors, `@InjectHerdGuard(name)`.
 */
export function getHerdGuardToken(
  name: string = DEFAULT_CACHE_NAME,
): string | typeof HerdGuardService {
  return name === DEFAULT_CACHE_NAME ? HerdGuardService : `HerdGuardService(${name})`;
}

/**
 * The injection token of the {@link HerdGuardHealthIndicator} of the cache `name`: the class itself
 * for the default cache. In constructors, `@InjectHerdGuardHealth(name)`.
 */
export function getHerdGuardHealthToken(
  name: string = DEFAULT_CACHE_NAME,
): string | typeof HerdGuardHealthIndicator {
  return name === DEFAULT_CACHE_NAME
    ? HerdGuardHealthIndicator
    : `HerdGuardHealthIndicator(${name})`;
}
