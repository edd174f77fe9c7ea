// Core engine
export { HerdEngine } from './core/herd-engine.js';
export type {
  ClearMode,
  EngineActivity,
  HerdEngineOptions,
  LoadContext,
  LoadPolicy,
  Loader,
  ReadOptions,
  ReadResult,
} from './core/herd-engine.js';
export { SingleFlight } from './core/single-flight.js';
export type { FlightResult, WaitOptions } from './core/single-flight.js';
export { parseDuration } from './core/duration.js';
export type { Duration, DurationUnit } from './core/duration.js';
export { DEFAULT_POLICY, resolvePolicy } from './core/policy.js';
export type {
  BackoffPolicy,
  CachePolicy,
  Jitter,
  ResolvedPolicy,
  WaitTimeoutAction,
} from './core/policy.js';
export { ENTRY_FORMAT_VERSION, decodeEntry, encodeEntry } from './core/entry.js';
export type { Entry } from './core/entry.js';
export type {
  HerdEvent,
  HerdEventListener,
  HerdEventType,
  ReadCounter,
  ReadEvent,
  ReadPath,
} from './core/events.js';
export type { LoadTracer, WaitOutcome } from './core/load-tracer.js';
export type { Fill, FillMode } from './core/fill.js';
export type { StatsSnapshot } from './core/stats.js';

// Stores: the interface core defines, and the stores that implement it
export { CORRUPT_ENTRY } from './core/herd-store.interface.js';
export type {
  AcquireOptions,
  BreakerState,
  FillWatch,
  HerdStore,
  InvalidationMode,
  InvalidationResult,
  KeyIndex,
  Lease,
  LeaseAttempt,
  StoreHealth,
  StoreRead,
  StoreSnapshot,
  StoreStatus,
} from './core/herd-store.interface.js';
export { FillSignals } from './stores/fill-signals.js';
export { MemoryStore } from './stores/memory/memory.store.js';
export type { MemoryStoreOptions } from './stores/memory/memory.store.js';
// The Redis store (and ioredis) is in 'herd-guard/redis' (lib/redis.ts).

// Observability
export { PrometheusMetrics } from './metrics/prometheus-metrics.js';
export type { PrometheusMetricsOptions, PrometheusRegistry } from './metrics/prometheus-metrics.js';
export { EventLogger } from './logging/event-logger.js';
export type { HerdGuardHotKeysOptions } from './interfaces/herd-guard-hot-keys-options.interface.js';
export type { HerdGuardTelemetryOptions } from './interfaces/herd-guard-telemetry-options.interface.js';
export { HotKeyTracker } from './metrics/hot-key-tracker.js';
export { HotKeys } from './metrics/hot-keys.js';
export type { HotKey } from './metrics/hot-keys.js';
export type { HotKeysSnapshot } from './metrics/hot-key-tracker.js';
export { HerdGuardHealthIndicator } from './health/herd-guard.health.js';
export type {
  HerdGuardHealthDetails,
  HerdGuardHealthOptions,
  HerdGuardHealthResult,
  HerdGuardHealthStatus,
} from './health/herd-guard.health.js';

// Errors
export * from './errors/index.js';
export { isLoaderFailure } from './errors/loader-failure.js';

// NestJS
export { HerdGuardModule } from './herd-guard.module.js';
export { HERD_GUARD_MODULE_OPTIONS } from './herd-guard.module-definition.js';
export type {
  HerdGuardModuleAsyncOptions,
  HerdGuardModuleForRootOptions,
  HerdGuardOptionsFactory,
} from './herd-guard.module-definition.js';
export { HerdGuardService } from './herd-guard.service.js';
export type { HerdGuardMetricsSnapshot, WriteOptions } from './herd-guard.service.js';
export { HERD_GUARD_ENGINE } from './herd-guard.constants.js';
export {
  DEFAULT_CACHE_NAME,
  getHerdGuardHealthToken,
  getHerdGuardToken,
} from './herd-guard.names.js';
export {
  InjectHerdGuard,
  InjectHerdGuardHealth,
} from './decorators/inject-herd-guard.decorator.js';
export { Cached } from './decorators/cached.decorator.js';
export { CachedRoute } from './decorators/cached-route.decorator.js';
export { SkipCache } from './decorators/skip-cache.decorator.js';
export { HerdGuardInterceptor } from './interceptors/herd-guard.interceptor.js';
export { cacheHeaders } from './interceptors/cache-headers.js';
export type { CacheHeaders } from './interceptors/cache-headers.js';
export { CACHEABLE_STATUSES } from './interceptors/cached-response.js';
export type { CachedResponse } from './interceptors/cached-response.js';
export type { RouteConfig } from './metadata/route-config.js';
export { methodCacheKey } from './keys/method-key.js';
export { routeCacheKey } from './keys/route-key.js';
export type { RouteKeyParts } from './keys/route-key.js';
export { stableSerialize } from './keys/stable-serialize.js';
export { KeySerializationError } from './errors/key-serialization.error.js';
export type { CachedOptions } from './interfaces/cached-options.interface.js';
export type { CachedRouteOptions } from './interfaces/cached-route-options.interface.js';
export type {
  HerdGuardModuleExtras,
  HerdGuardModuleOptions,
} from './interfaces/herd-guard-module-options.interface.js';
export type { HerdGuardRedisOptions } from './interfaces/herd-guard-redis-options.interface.js';
export type { HerdLoader } from './interfaces/herd-loader.interface.js';
export type { WarmEntry, WarmOptions, WarmReport } from './interfaces/warm.interface.js';
