import { Controller, Get, Header, Query } from '@nestjs/common';
import { HealthCheck, HealthCheckService, type HealthCheckResult } from '@nestjs/terminus';
import { Registry } from 'prom-client';
import {
  HerdGuardHealthIndicator,
  HerdGuardService,
  type HerdGuardMetricsSnapshot,
} from '../../lib/index.js';
import { CatalogDatabase } from '../catalog/catalog.database.js';

/** Health, Prometheus metrics and the numbers that show what the cache saved the database. */
@Controller()
export class OpsController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly herdGuard: HerdGuardHealthIndicator,
    private readonly cache: HerdGuardService,
    private readonly registry: Registry,
    private readonly db: CatalogDatabase,
  ) {}

  /** `up`, or `degraded` (HTTP 200) while Redis is unreachable and the cache answers from this process. */
  @Get('health')
  @HealthCheck()
  check(): Promise<HealthCheckResult> {
    return this.health.check([() => this.herdGuard.isHealthy('cache')]);
  }

  @Get('metrics')
  @Header('Content-Type', 'text/plain; version=0.0.4; charset=utf-8')
  metrics(): Promise<string> {
    return this.registry.metrics();
  }

  /** The hottest keys (most read, most loaded): kept out of metric labels, served here by hash. */
  @Get('cache/hot-keys')
  hotKeys(@Query('top') top = '10'): HerdGuardMetricsSnapshot['hotKeys'] {
    return this.cache.metrics(Math.min(64, Math.max(1, Number(top) || 10))).hotKeys;
  }

  /** Database queries run since start, beside the cache's counters. */
  @Get('stats')
  stats(): { databaseQueries: number; cache: HerdGuardMetricsSnapshot } {
    return { databaseQueries: this.db.queries, cache: this.cache.metrics(5) };
  }
}
