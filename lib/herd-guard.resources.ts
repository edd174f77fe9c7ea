import { Logger } from '@nestjs/common';
import { HerdEngine } from './core/herd-engine.js';
import { ConfigurationError } from './errors/configuration.error.js';
import { EventLogger } from './logging/event-logger.js';
import { HotKeyTracker } from './metrics/hot-key-tracker.js';
import { PrometheusMetrics } from './metrics/prometheus-metrics.js';
import { validateModuleOptions } from './herd-guard-options.validator.js';
import { DEFAULT_CACHE_NAME } from './herd-guard.names.js';
import type { HerdGuardModuleOptions } from './interfaces/herd-guard-module-options.interface.js';
import type { HerdStore } from './core/herd-store.interface.js';
import { MemoryStore } from './stores/memory/memory.store.js';
import type * as RedisEntry from './redis.js';
import type { RedisStoreOptions } from './stores/redis/redis-store.options.js';
import { importOtelApi, loadOtelApi } from './telemetry/otel-api.js';
import { Telemetry, untraced } from './telemetry/telemetry.js';

/** What one module instance runs on. Written once at module start, closed once on shutdown. */
export interface HerdGuardResources {
  readonly options: HerdGuardModuleOptions;
  readonly engine: HerdEngine;
  /**
   * The store the module opened (memory or Redis), closed on shutdown; `undefined` for a store you
   * passed.
   */
  readonly ownedStore: HerdStore | undefined;
  /** Hottest keys, when `hotKeys` is not 0. */
  readonly hotKeys: HotKeyTracker | undefined;
  readonly metrics: PrometheusMetrics | undefined;
  readonly logger: EventLogger | undefined;
  /** OpenTelemetry tracing and metrics, when `@opentelemetry/api` is loaded. */
  readonly telemetry: OpenTelemetry | undefined;
}

/** What the module keeps of its OpenTelemetry (declared here without the API's types). */
export interface OpenTelemetry {
  readonly tracing: boolean;
  readonly metrics: boolean;
  close(): void;
}

/**
 * Validates the options of the cache `name`, then opens the store (unless one was given) and the
 * engine over it.
 */
export async function openResources(
  input: unknown,
  name: string,
  importApi: () => Promise<unknown> = importOtelApi,
): Promise<HerdGuardResources> {
  const options = validateModuleOptions(input);
  const otel =
    options.telemetry === false
      ? undefined
      : await loadOtelApi(options.telemetry !== undefined, importApi);
  // The store's own commands (connections, heartbeats, notifications) are never traced.
  const ownedStore =
    options.store !== undefined
      ? undefined
      : await (otel === undefined ? openStore(options) : untraced(otel, () => openStore(options)));
  const store = options.store ?? (ownedStore as HerdStore);
  try {
    const engine = new HerdEngine({ store, policy: options.policy });
    const hotKeys = openHotKeys(engine, options);
    const metrics = await openMetrics(engine, options, name);
    const logger = openLogger(engine, options, name);
    const telemetry =
      otel === undefined
        ? undefined
        : new Telemetry(
            otel,
            engine,
            typeof options.telemetry === 'object' ? options.telemetry : {},
            { cacheName: labelOf(options, name), namespace: options.namespace },
          );
    return { options, engine, ownedStore, hotKeys, metrics, logger, telemetry };
  } catch (error) {
    await ownedStore?.close();
    throw error;
  }
}

/** The hot-key summary, unless `hotKeys` is 0 (or its capacity is). */
function openHotKeys(
  engine: HerdEngine,
  options: HerdGuardModuleOptions,
): HotKeyTracker | undefined {
  const settings =
    typeof options.hotKeys === 'number' ? { capacity: options.hotKeys } : options.hotKeys;
  const capacity = settings?.capacity ?? 64;
  if (capacity === 0) return undefined;
  return new HotKeyTracker(engine, capacity, { rawKeys: settings?.rawKeys === true });
}

/** Prometheus metrics with prom-client, when `metrics` asks for them. */
async function openMetrics(
  engine: HerdEngine,
  options: HerdGuardModuleOptions,
  name: string,
): Promise<PrometheusMetrics | undefined> {
  if (options.metrics === undefined || options.metrics === false) return undefined;
  const settings = options.metrics === true ? {} : options.metrics;
  return PrometheusMetrics.create(engine, { cacheName: labelOf(options, name), ...settings });
}

/**
 * The `cache` label is the cache's name, so that the caches of one app differ in a shared registry;
 * the unnamed cache keeps its namespace (or `default`), as before names existed.
 */
function labelOf(options: HerdGuardModuleOptions, name: string): string {
  return name === DEFAULT_CACHE_NAME ? (options.namespace ?? DEFAULT_CACHE_NAME) : name;
}

/** Logs of a named cache go under the context `HerdGuard:<name>`. */
function openLogger(
  engine: HerdEngine,
  options: HerdGuardModuleOptions,
  name: string,
): EventLogger | undefined {
  if (options.logging === false) return undefined;
  const logger =
    options.logging === undefined || options.logging === true
      ? new Logger(name === DEFAULT_CACHE_NAME ? 'HerdGuard' : `HerdGuard:${name}`)
      : options.logging;
  return new EventLogger(engine, logger);
}

/** The close of each module's resources, once started: shutdown and a failed init share it. */
const closing = new WeakMap<HerdGuardResources, Promise<void>>();

/**
 * Stops the engine (running loaders see their signal fire), then closes the store the module
 * opened. A second call waits for the same close.
 */
export function closeResources(resources: HerdGuardResources): Promise<void> {
  let closed = closing.get(resources);
  if (closed === undefined) {
    closed = close(resources);
    closing.set(resources, closed);
  }
  return closed;
}

async function close(resources: HerdGuardResources): Promise<void> {
  resources.metrics?.close();
  resources.hotKeys?.close();
  resources.logger?.close();
  resources.telemetry?.close();
  await resources.engine.close();
  await resources.ownedStore?.close();
}

async function openStore(options: HerdGuardModuleOptions): Promise<HerdStore> {
  if (options.redis === undefined) return new MemoryStore(options.memory);
  const { RedisStore } = await loadRedisEntry();
  // The option's ioredis fields are typed `object` (see HerdGuardRedisOptions); ioredis checks
  // them.
  const redis: RedisStoreOptions =
    typeof options.redis === 'string'
      ? { url: options.redis }
      : (options.redis as RedisStoreOptions);
  const store = new RedisStore(
    options.namespace === undefined ? redis : { namespace: options.namespace, ...redis },
  );
  // Let the first requests find a connection; Redis being down is not fatal (the store starts
  // degraded).
  await store.ready();
  return store;
}

/**
 * herd-guard/redis, loaded only when Redis is configured, so that an app on the memory store needs
 * no ioredis.
 */
async function loadRedisEntry(): Promise<typeof RedisEntry> {
  try {
    return await import('./redis.js');
  } catch (error) {
    const code = (error as { code?: unknown } | null)?.code;
    const missing =
      (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') &&
      /ioredis/.test(String(error));
    if (!missing) throw error;
    throw new ConfigurationError(
      'redis',
      'the Redis store needs ioredis, which is not installed: npm install ioredis',
    );
  }
}
