import type { LoggerService } from '@nestjs/common';
import type { CachePolicy } from '../core/policy.js';
import type { PrometheusMetricsOptions } from '../metrics/prometheus-metrics.js';
import type { HerdStore } from '../core/herd-store.interface.js';
import type { MemoryStoreOptions } from '../stores/memory/memory.store.js';
import type { HerdGuardHotKeysOptions } from './herd-guard-hot-keys-options.interface.js';
import type { HerdGuardTelemetryOptions } from './herd-guard-telemetry-options.interface.js';
import type { HerdGuardRedisOptions } from './herd-guard-redis-options.interface.js';

/**
 * Options of `HerdGuardModule.forRoot()` (and the result of the `forRootAsync()` factory).
 * Choose at most one of `store` and `redis`; with neither, an in-memory store is used.
 */
export interface HerdGuardModuleOptions {
  /** A store you created and own: the module uses it and never closes it. */
  readonly store?: HerdStore;
  /**
   * Redis, by URL (`redis://host:6379`) or the options of `RedisStore` ({@link
   * HerdGuardRedisOptions}).
   * The module loads `herd-guard/redis` (and so ioredis) only then, opens the store at start and
   * closes it on application shutdown (a `client` you pass inside stays yours).
   */
  readonly redis?: string | HerdGuardRedisOptions;
  /** Options of the default in-memory store (only when neither `store` nor `redis` is given). */
  readonly memory?: MemoryStoreOptions;
  /**
   * Prefix of every Redis key, so several apps can share one Redis. Applies to the store opened
   * from `redis` (a `namespace` inside `redis` wins); the memory store is per process and needs
   * none.
   */
  readonly namespace?: string;
  /**
   * Default policy of every read; per-call, `@Cached` and `@CachedRoute` policies override it field
   * by field.
   */
  readonly policy?: CachePolicy;
  /**
   * Export Prometheus metrics with prom-client (installed by the app): `true` registers them in
   * prom-client's default registry; options choose the registry (`registry`), prefix and
   * `cacheName`
   * label (default: the namespace, or `default`). Default off.
   */
  readonly metrics?: boolean | PrometheusMetricsOptions;
  /**
   * OpenTelemetry through `@opentelemetry/api` (an optional peer; the app owns the SDK): a span per
   * load and per waiting caller, and herd-guard's metrics on the global MeterProvider. Default: on
   * when `@opentelemetry/api` is installed (without a registered SDK it records nothing), off
   * otherwise. `false` never loads it; `true` or options require it (start fails without it).
   */
  readonly telemetry?: boolean | HerdGuardTelemetryOptions;
  /**
   * Structured logs of lease results, load durations and fallback reasons (never one per hit):
   * `true` logs through Nest's `Logger` (context `HerdGuard`), or pass your own LoggerService;
   * `false` disables. Default `true`.
   */
  readonly logging?: boolean | LoggerService;
  /**
   * The hot-key summary (most read / most loaded keys) of `metrics()`: how many counters it keeps,
   * at most 10,000 (each read costs O(1) whatever the number; `0` disables; default 64), or
   * `{ capacity, rawKeys }`. It names keys by hash unless `rawKeys: true`
   * ({@link HerdGuardHotKeysOptions}).
   */
  readonly hotKeys?: number | HerdGuardHotKeysOptions;
  /**
   * Request headers that carry credentials besides `Authorization` and `Cookie` (e.g.
   * `['x-api-key']`), any case: the interceptor treats a request with one as private, for the routes
   * whose responses go in this cache (docs/nestjs.md#private-requests). Default none.
   */
  readonly credentialHeaders?: readonly string[];
}

/** Options of the module definition itself, next to {@link HerdGuardModuleOptions}. */
export interface HerdGuardModuleExtras {
  /** Register the module globally, so feature modules need not import it. Default `false`. */
  readonly isGlobal?: boolean;
  /**
   * The cache's name, for an app with several caches (each `forRoot` its own store, namespace and
   * policy): inject it with `@InjectHerdGuard(name)` and route methods to it with
   * `@Cached({ cache: name })`. 1-64 characters from A-Z a-z 0-9 . _ : -; unique in the app. Default
   * `'default'`: the cache `HerdGuardService` (the class) injects. In `forRootAsync` it sits next to
   * `useFactory`, not in what the factory returns.
   */
  readonly name?: string;
}
