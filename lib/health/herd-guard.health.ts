import { Inject, Injectable } from '@nestjs/common';
import type { BreakerState, StoreStatus } from '../core/herd-store.interface.js';
import { HERD_GUARD_SERVICE } from '../herd-guard.constants.js';
import type { HerdGuardService } from '../herd-guard.service.js';

/** A health status as `@nestjs/terminus` reads it (terminus 11 knows only `up` and `down`). */
export type HerdGuardHealthStatus = 'up' | 'degraded' | 'down';

/**
 * What the indicator reports under its key; the shape `@nestjs/terminus` expects of an indicator.
 */
export interface HerdGuardHealthDetails<
  Status extends HerdGuardHealthStatus = HerdGuardHealthStatus,
> {
  readonly status: Status;
  /** `memory` or `redis`. */
  readonly store: string;
  readonly storeStatus: StoreStatus;
  readonly breaker: BreakerState;
  readonly reason?: string;
  /**
   * What is wrong with the store's setup though it works (a Redis that may evict the indexes
   * invalidation depends on): fix it, the status does not show it.
   */
  readonly warnings?: readonly string[];
  /** Keys with a load in progress in this process. */
  readonly inflight: number;
}

export type HerdGuardHealthResult<
  Key extends string,
  Status extends HerdGuardHealthStatus = HerdGuardHealthStatus,
> = Record<Key, HerdGuardHealthDetails<Status>>;

export interface HerdGuardHealthOptions<
  Degraded extends HerdGuardHealthStatus = HerdGuardHealthStatus,
> {
  /**
   * What a degraded store (Redis unreachable, breaker open) is reported as. Default `'degraded'`:
   * terminus 12 keeps the check at HTTP 200 with the overall status `degraded`. Terminus 11 knows
   * only `up` and `down` (it drops any other status): use `'up'` there; the details still say
   * `storeStatus: 'degraded'`. `'down'` takes the pod out of rotation, which usually makes things
   * worse: while degraded, herd-guard still answers from this process.
   */
  readonly degradedAs?: Degraded;
  /** Same as `degradedAs: 'down'` (wins over `degradedAs`). */
  readonly failWhenDegraded?: boolean;
}

/**
 * A `@nestjs/terminus` health indicator for the cache: whether the store is reachable, degraded or
 * closed, and the breaker state. With terminus 12, `degraded` keeps the check at HTTP 200 and makes
 * the overall status `degraded`; with terminus 11 (Nest 11), ask for `{ degradedAs: 'up' }`.
 *
 * ```ts
 * @Get('health') @HealthCheck()
 * check() { return this.health.check([() => this.herdGuard.isHealthy('cache')]); }
 * ```
 */
@Injectable()
export class HerdGuardHealthIndicator {
  /** `cache`: the service of the module the indicator belongs to (its cache, named or not). */
  constructor(@Inject(HERD_GUARD_SERVICE) private readonly cache: HerdGuardService) {}

  isHealthy<
    const Key extends string = 'herdGuard',
    const Degraded extends HerdGuardHealthStatus = 'degraded',
  >(
    key: Key = 'herdGuard' as Key,
    options: HerdGuardHealthOptions<Degraded> = {},
  ): Promise<HerdGuardHealthResult<Key, 'up' | 'down' | Degraded>> {
    const health = this.cache.health();
    const degradedAs =
      options.failWhenDegraded === true ? 'down' : (options.degradedAs ?? 'degraded');
    const status =
      health.status === 'up' ? 'up' : health.status === 'degraded' ? degradedAs : 'down';
    const details: HerdGuardHealthDetails = {
      status,
      store: this.cache.engine.store.name,
      storeStatus: health.status,
      breaker: health.breaker,
      inflight: this.cache.engine.activity().inflight,
      ...(health.reason === undefined ? {} : { reason: health.reason }),
      ...(health.warnings === undefined ? {} : { warnings: health.warnings }),
    };
    return Promise.resolve({ [key]: details } as HerdGuardHealthResult<
      Key,
      'up' | 'down' | Degraded
    >);
  }
}
