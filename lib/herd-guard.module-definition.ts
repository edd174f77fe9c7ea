import { ConfigurableModuleBuilder } from '@nestjs/common';
import type {
  HerdGuardModuleExtras,
  HerdGuardModuleOptions,
} from './interfaces/herd-guard-module-options.interface.js';

export const {
  ConfigurableModuleClass: ConfigurableHerdGuardModule,
  MODULE_OPTIONS_TOKEN: HERD_GUARD_MODULE_OPTIONS,
  OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<HerdGuardModuleOptions>({ moduleName: 'HerdGuard' })
  .setClassMethodName('forRoot')
  .setFactoryMethodName('createHerdGuardOptions')
  .setExtras<HerdGuardModuleExtras>({ isGlobal: false }, (definition, extras) => ({
    ...definition,
    global: extras.isGlobal,
  }))
  .build();

/** What `HerdGuardModule.forRoot()` accepts: the module options plus `isGlobal`. */
export type HerdGuardModuleForRootOptions = typeof OPTIONS_TYPE;
/** A class for `forRootAsync({ useClass })`: it returns the module options. */
export interface HerdGuardOptionsFactory {
  createHerdGuardOptions(): HerdGuardModuleOptions | Promise<HerdGuardModuleOptions>;
}

/**
 * What `HerdGuardModule.forRootAsync()` accepts: `imports`, `useFactory`, `inject` (or
 * `useClass`/`useExisting`), `isGlobal`.
 */
export type HerdGuardModuleAsyncOptions = typeof ASYNC_OPTIONS_TYPE;
