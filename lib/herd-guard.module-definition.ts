import { ConfigurableModuleBuilder, type DynamicModule } from '@nestjs/common';
import { HERD_GUARD_CACHE_NAME, HERD_GUARD_SERVICE } from './herd-guard.constants.js';
import {
  DEFAULT_CACHE_NAME,
  cacheName,
  getHerdGuardHealthToken,
  getHerdGuardToken,
} from './herd-guard.names.js';
import { HerdGuardHealthIndicator } from './health/herd-guard.health.js';
import { HerdGuardService } from './herd-guard.service.js';
import type {
  HerdGuardModuleExtras,
  HerdGuardModuleOptions,
} from './interfaces/herd-guard-module-options.interface.js';

/**
 * What one `forRoot`/`forRootAsync` call adds to the module: its cache's name, and its service and
 * health indicator, provided and exported under the name's tokens (the classes themselves for the
 * default cache), so that `get(HerdGuardService)` finds the default cache whatever else the app
 * has.
 *
 * @throws {ConfigurationError} `name` is not a valid cache name.
 */
function cacheModule(definition: DynamicModule, extras: HerdGuardModuleExtras): DynamicModule {
  const name = cacheName(extras.name);
  const service = getHerdGuardToken(name);
  const health = getHerdGuardHealthToken(name);
  return {
    ...definition,
    global: extras.isGlobal,
    providers: [
      ...(definition.providers ?? []),
      { provide: HERD_GUARD_CACHE_NAME, useValue: name },
      { provide: service, useClass: HerdGuardService },
      { provide: HERD_GUARD_SERVICE, useExisting: service },
      { provide: health, useClass: HerdGuardHealthIndicator },
    ],
    exports: [service, health],
  };
}

export const {
  ConfigurableModuleClass: ConfigurableHerdGuardModule,
  MODULE_OPTIONS_TOKEN: HERD_GUARD_MODULE_OPTIONS,
  OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<HerdGuardModuleOptions>({ moduleName: 'HerdGuard' })
  .setClassMethodName('forRoot')
  .setFactoryMethodName('createHerdGuardOptions')
  // `name` is listed so that forRoot() takes it out of the options it provides.
  .setExtras<HerdGuardModuleExtras>({ isGlobal: false, name: DEFAULT_CACHE_NAME }, cacheModule)
  .build();

/** What `HerdGuardModule.forRoot()` accepts: the module options plus `isGlobal` and `name`. */
export type HerdGuardModuleForRootOptions = typeof OPTIONS_TYPE;
/** A class for `forRootAsync({ useClass })`: it returns the module options. */
export interface HerdGuardOptionsFactory {
  createHerdGuardOptions(): HerdGuardModuleOptions | Promise<HerdGuardModuleOptions>;
}

/**
 * What `HerdGuardModule.forRootAsync()` accepts: `imports`, `useFactory`, `inject` (or
 * `useClass`/`useExisting`), `isGlobal` and `name` (known without the factory: it names the
 * module's injection tokens).
 */
export type HerdGuardModuleAsyncOptions = typeof ASYNC_OPTIONS_TYPE;
