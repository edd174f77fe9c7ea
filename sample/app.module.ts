import { type DynamicModule, Module, type OnApplicationShutdown } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { HerdGuardModule } from '../lib/index.js';
import { CatalogDatabase } from './catalog/catalog.database.js';
import { CatalogService } from './catalog/catalog.service.js';
import { ProductsController } from './catalog/products.controller.js';
import type { SampleConfig } from './config.js';
import { OpsController } from './ops/ops.controller.js';
import { OutageController } from './ops/outage.controller.js';

/** The app's own Prometheus registry, shared with herd-guard (as an app with existing metrics would). */
@Module({
  providers: [
    {
      provide: Registry,
      useFactory: () => {
        const registry = new Registry();
        collectDefaultMetrics({ register: registry });
        return registry;
      },
    },
  ],
  exports: [Registry],
})
class MetricsRegistryModule {}

@Module({})
class DatabaseHost implements OnApplicationShutdown {
  constructor(private readonly db: CatalogDatabase) {}

  onApplicationShutdown(): void {
    this.db.close();
  }
}

/** The catalog sample: SQLite behind herd-guard, on the memory store or on Redis (`REDIS_URL`). */
@Module({})
export class AppModule {
  static register(config: SampleConfig): DynamicModule {
    const database = {
      provide: CatalogDatabase,
      useFactory: () =>
        new CatalogDatabase({ file: config.databaseFile, queryDelayMs: config.queryDelayMs }),
    };
    return {
      module: AppModule,
      imports: [
        TerminusModule,
        MetricsRegistryModule,
        HerdGuardModule.forRootAsync({
          isGlobal: true,
          imports: [MetricsRegistryModule],
          inject: [Registry],
          useFactory: (registry: Registry) => ({
            redis: config.redisUrl,
            namespace: 'catalog',
            policy: { soft: config.soft, hard: config.hard, negativeTtl: '30s' },
            metrics: { registry },
          }),
        }),
        { module: DatabaseHost, providers: [database], exports: [CatalogDatabase], global: true },
      ],
      controllers: [
        ProductsController,
        OpsController,
        ...(config.outageSwitch === true ? [OutageController] : []),
      ],
      providers: [CatalogService],
    };
  }
}
