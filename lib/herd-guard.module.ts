import { type DynamicModule, Inject, Module, type OnApplicationShutdown } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { ConfigurationError } from './errors/configuration.error.js';
import { CachedMethodsExplorer } from './decorators/cached-methods.explorer.js';
import {
  HERD_GUARD_CACHE_NAME,
  HERD_GUARD_CREDENTIAL_HEADERS,
  HERD_GUARD_DEFAULT_POLICY,
  HERD_GUARD_ENGINE,
  HERD_GUARD_HOT_KEYS,
  HERD_GUARD_RESOURCES,
} from './herd-guard.constants.js';
import { HerdGuardCaches, HerdGuardCachesModule } from './herd-guard.caches.js';
import {
  ConfigurableHerdGuardModule,
  HERD_GUARD_MODULE_OPTIONS,
  type HerdGuardModuleForRootOptions,
} from './herd-guard.module-definition.js';
import { type HerdGuardResources, closeResources } from './herd-guard.resources.js';

/**
 * herd-guard for a Nest application: `HerdGuardModule.forRoot(options)` or
 * `forRootAsync({ imports, useFactory, inject })`, with `isGlobal` to skip importing it in
 * feature modules. Options are checked at start (a bad one fails the bootstrap with a
 * `ConfigurationError` naming it). Provides {@link HerdGuardService}, wraps `@Cached` methods, and
 * on application shutdown stops the engine and closes the store it opened (never one you passed).
 * One `forRoot` per cache: several caches in one app each take their own `name` (one may stay
 * unnamed, the default cache); what the module exports depends on it (docs/nestjs.md#named-caches).
 */
@Module({
  imports: [DiscoveryModule, HerdGuardCachesModule],
  providers: [
    {
      provide: HERD_GUARD_RESOURCES,
      useFactory: (caches: HerdGuardCaches, name: string, options: unknown) =>
        caches.open(name, options),
      inject: [HerdGuardCaches, HERD_GUARD_CACHE_NAME, HERD_GUARD_MODULE_OPTIONS],
    },
    {
      provide: HERD_GUARD_ENGINE,
      useFactory: (resources: HerdGuardResources) => resources.engine,
      inject: [HERD_GUARD_RESOURCES],
    },
    {
      provide: HERD_GUARD_DEFAULT_POLICY,
      useFactory: (resources: HerdGuardResources) => resources.options.policy,
      inject: [HERD_GUARD_RESOURCES],
    },
    {
      provide: HERD_GUARD_HOT_KEYS,
      useFactory: (resources: HerdGuardResources) => resources.hotKeys,
      inject: [HERD_GUARD_RESOURCES],
    },
    {
      provide: HERD_GUARD_CREDENTIAL_HEADERS,
      // Node.js gives request header names in lower case.
      useFactory: (resources: HerdGuardResources) =>
        (resources.options.credentialHeaders ?? []).map((name) => name.toLowerCase()),
      inject: [HERD_GUARD_RESOURCES],
    },
    CachedMethodsExplorer,
  ],
})
export class HerdGuardModule extends ConfigurableHerdGuardModule implements OnApplicationShutdown {
  constructor(@Inject(HERD_GUARD_RESOURCES) private readonly resources: HerdGuardResources) {
    super();
  }

  /** `forRoot()` with no argument uses the memory store and the default policy. */
  static override forRoot(options: HerdGuardModuleForRootOptions = {}): DynamicModule {
    if (typeof options !== 'object' || options === null || Array.isArray(options)) {
      throw new ConfigurationError(
        'options',
        'HerdGuardModule.forRoot() expects an options object',
      );
    }
    return super.forRoot(options);
  }

  /** Closes what the module opened (also when its init failed and closed it already). */
  onApplicationShutdown(): Promise<void> {
    return closeResources(this.resources);
  }
}
