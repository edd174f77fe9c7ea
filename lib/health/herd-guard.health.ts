import { Injectable } from '@nestjs/common';
import type { BreakerState, StoreStatus } from '../stores/herd-store.interface.js';
import { HerdGuardService } from '../herd-guard.service.js';

/** What the indicator reports under its key; the shape `@nestjs/terminus` expects of an indicator. */
export interface HerdGuardHealthDetails {
  readonly status: 'up' | 'degraded' | 'down';
  /** `memory` or `redis`. */
  readonly store: string;
  readonly storeStatus: StoreStatus;
  readonly breaker: BreakerState;
  readonly reason?: string;
  /** Keys with a load in progress in this process. */
  readonly inflight: number;
}

export type HerdGuardHealthResult<Key extends string> = Record<Key, HerdGuardHealthDetails>;

export interface HerdGuardHealthOptions {
  /**
   * Report a degraded store (Redis unreachable, breaker open) as `down` instead of `degraded`. Off by
   * default: while degraded, herd-guard still answers (from this process), so taking the pod out of
   * rotation usually makes things worse.
   */
  readonly failWhenDegraded?: boolean;
}

/**
 * A `@nestjs/terminus` health indicator for the cache: whether the store is reachable, degraded or
 * closed, and the breaker state. With terminus 12, `degraded` keeps the check at HTTP 200 and makes
 * the overall status `degraded`.
 *
 * ```ts
 * @Get('health') @HealthCheck()
 * check() { return this.health.check([() => this.herdGuard.isHealthy('cache')]); }
 * ```
 */
@Injectable()
export class HerdGuardHealthIndicator {
  constructor(private readonly cache: HerdGuardService) {}

  isHealthy<const Key extends string = 'herdGuard'>(
    key: Key = 'herdGuard' as Key,
    options: HerdGuardHealthOptions = {},
  ): Promise<HerdGuardHealthResult<Key>> {
    const health = this.cache.health();
    const status =
      health.status === 'up'
        ? 'up'
        : health.status === 'degraded' && options.failWhenDegraded !== true
          ? 'degraded'
          : 'down';
    const details: HerdGuardHealthDetails = {
      status,
      store: this.cache.engine.store.name,
      storeStatus: health.status,
      breaker: health.breaker,
      inflight: this.cache.engine.activity().inflight,
      ...(health.reason === undefined ? {} : { reason: health.reason }),
    };
    return Promise.resolve({ [key]: details } as HerdGuardHealthResult<Key>);
  }
}
