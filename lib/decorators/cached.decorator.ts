import { SetMetadata } from '@nestjs/common';
import { ConfigurationError } from '../errors/configuration.error.js';
import { HERD_GUARD_CACHED } from '../herd-guard.constants.js';
import type { CachedOptions } from '../interfaces/cached-options.interface.js';

/**
 * Caches a provider method: concurrent calls with equal arguments share one execution, and the
 * result is cached under `Class.method(<arguments>)` (see `keyPrefix`; or `options.key(...args)`)
 * with the module policy overridden by `options`. The method must be `async` (or declared to return
 * a `Promise`) or
 * declared to return an `Observable` (one value is emitted: the cached one).
 *
 * The decorator only records metadata; `HerdGuardModule` wraps the method on each provider
 * instance at module init with its own cache. Without the module (plain `new`, unit tests, an app
 * that does not import it) the method runs uncached, exactly as written.
 */
export function Cached<A extends unknown[] = never[]>(options: CachedOptions<A> = {}) {
  return <M extends (...args: A) => unknown>(
    target: object,
    propertyKey: string | symbol,
    descriptor: TypedPropertyDescriptor<M>,
  ): void => {
    if (typeof descriptor.value !== 'function') {
      throw new ConfigurationError(
        `@Cached(${String(propertyKey)})`,
        'applies to methods only, not accessors',
      );
    }
    SetMetadata(HERD_GUARD_CACHED, options)(target, propertyKey, descriptor);
  };
}
