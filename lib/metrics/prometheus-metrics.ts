import type * as PromClientModule from 'prom-client';
import type { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { HerdEvent } from '../core/events.js';
import type { HerdEngine } from '../core/herd-engine.js';
import type { HerdStore } from '../core/herd-store.interface.js';
import type { NearCacheReport } from '../stores/redis/near-cache.js';
import { ConfigurationError } from '../errors/configuration.error.js';
import { isLoaderFailure } from '../errors/loader-failure.js';

/**
 * What herd-guard uses of a prom-client `Registry` (any prom-client 15 `Registry` is one). Declared
 * here so that herd-guard's type declarations never name prom-client, an optional peer: an app
 * without metrics type-checks without it installed.
 */
export interface PrometheusRegistry {
  getSingleMetric(name: string): unknown;
  registerMetric(metric: object): void;
}

export interface PrometheusMetricsOptions {
  /**
   * Where to register: a prom-client `Registry`. Default: prom-client's default registry. Pass your
   * app's registry to share it.
   */
  readonly registry?: PrometheusRegistry;
  /** Prefix of every metric name. Default `herd_guard_`. */
  readonly prefix?: string;
  /** Value of the `cache` label, to tell several caches of one app apart. Default `default`. */
  readonly cacheName?: string;
  /** Histogram buckets in seconds for loader and request durations. */
  readonly buckets?: readonly number[];
}

const DEFAULT_BUCKETS = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
];
const PREFIX_PATTERN = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const BREAKER_VALUE = { closed: 0, 'half-open': 1, open: 2 } as const;
type StaleReason = Extract<HerdEvent, { type: 'stale-on-error' }>['reason'];
/** Every reason, so that each series exists (at 0) before its first increment. */
const STALE_REASONS = Object.keys({
  'loader-failed': true,
  'loader-timeout': true,
  'wait-timeout': true,
  'store-down': true,
} satisfies Record<StaleReason, true>) as StaleReason[];
const TRIGGERS = ['miss', 'refresh'] as const;

type PromClient = typeof PromClientModule;
/** A metric whose values are read from the engines at scrape time. */
type Collected = Gauge<'cache'> | Counter<'cache'>;

/**
 * The engines a metric read at scrape time reports on, per metric (several caches may share one
 * registry).
 */
const collectedSources = new WeakMap<object, Map<string, HerdEngine>>();

/** The near cache of a store that has one (the Redis store), read through its `nearCache` getter. */
function nearCacheOf(store: HerdStore): NearCacheReport | undefined {
  const report = (store as { readonly nearCache?: unknown }).nearCache;
  return typeof report === 'object' && report !== null ? (report as NearCacheReport) : undefined;
}

/**
 * Exports an engine's events as Prometheus metrics with prom-client (an optional peer dependency,
 * loaded only when metrics are created). Labels have bounded values: cache keys never become
 * labels; the hottest keys are in {@link HerdGuardService.metrics} instead. A counter's series
 * with a known label value exist from the start at 0, so that `rate()` and alerts see their first
 * increment.
 */
export class PrometheusMetrics {
  /** The prom-client `Registry` the metrics are in. */
  readonly registry: PrometheusRegistry;
  readonly #unsubscribe: () => void;
  readonly #cacheName: string;
  /** The metrics read from the engine at scrape time, shared by the caches of the registry. */
  readonly #collected: Collected[];

  private constructor(client: PromClient, engine: HerdEngine, options: PrometheusMetricsOptions) {
    const prefix = options.prefix ?? 'herd_guard_';
    if (!PREFIX_PATTERN.test(prefix))
      throw new ConfigurationError(
        'metrics.prefix',
        `"${prefix}" is not a valid Prometheus metric name prefix`,
      );
    this.registry = options.registry ?? client.register;
    const cache = (this.#cacheName = options.cacheName ?? 'default');
    const buckets = [...(options.buckets ?? DEFAULT_BUCKETS)];
    // A prom-client Registry, by the type of `options.registry` or as prom-client's own default.
    const registers = [this.registry as Registry];
    const counter = <L extends string>(
      name: string,
      help: string,
      labelNames: L[],
    ): Counter<L | 'cache'> =>
      this.#metric(
        `${prefix}${name}`,
        () =>
          new client.Counter({
            name: `${prefix}${name}`,
            help,
            labelNames: ['cache', ...labelNames],
            registers,
          }),
      );
    const histogram = <L extends string>(
      name: string,
      help: string,
      labelNames: L[],
    ): Histogram<L | 'cache'> =>
      this.#metric(
        `${prefix}${name}`,
        () =>
          new client.Histogram({
            name: `${prefix}${name}`,
            help,
            labelNames: ['cache', ...labelNames],
            buckets,
            registers,
          }),
      );
    const gauge = (
      name: string,
      help: string,
      read: (engine: HerdEngine) => number | undefined,
    ): Gauge<'cache'> =>
      this.#metric(`${prefix}${name}`, () => {
        const created = new client.Gauge({
          name: `${prefix}${name}`,
          help,
          labelNames: ['cache'],
          registers,
          collect() {
            for (const [cacheName, source] of collectedSources.get(created) ?? []) {
              const value = read(source);
              if (value !== undefined) created.set({ cache: cacheName }, value);
            }
          },
        });
        return created;
      });
    /** A counter kept by a component other than the engine, read at scrape time. */
    const collectedCounter = (
      name: string,
      help: string,
      read: (engine: HerdEngine) => number | undefined,
    ): Counter<'cache'> =>
      this.#metric(`${prefix}${name}`, () => {
        const created = new client.Counter({
          name: `${prefix}${name}`,
          help,
          labelNames: ['cache'],
          registers,
          collect() {
            for (const [cacheName, source] of collectedSources.get(created) ?? []) {
              const value = read(source);
              if (value === undefined) continue;
              // prom-client counters only go up by increments: replace the series with the total.
              created.remove({ cache: cacheName });
              created.inc({ cache: cacheName }, value);
            }
          },
        });
        return created;
      });

    const requests = counter(
      'requests_total',
      'Reads by result: fresh, stale, miss, or negative (a cached "not found").',
      ['result'],
    );
    const requestSeconds = histogram(
      'request_duration_seconds',
      'Read latency by path (fresh, stale, miss).',
      ['path'],
    );
    const coalesced = counter(
      'coalesced_total',
      'Callers that joined a load already running in this process.',
      [],
    );
    const fenced = counter(
      'loads_fenced_total',
      'Loads whose value was not stored because the key was invalidated (or its lease taken over) while they ran.',
      ['trigger'],
    );
    const loads = counter(
      'loads_total',
      'Loader runs by result (ok; error; uncached: answered with a client error or a response not to store) and trigger (miss, refresh).',
      ['result', 'trigger'],
    );
    const loaderErrors = counter(
      'loader_errors_total',
      'Loader runs that failed: threw (except client errors), were rejected or timed out.',
      ['trigger'],
    );
    const loaderSeconds = histogram(
      'loader_duration_seconds',
      'Loader duration, for p50/p95/p99.',
      ['result'],
    );
    const staleOnError = counter(
      'stale_served_on_error_total',
      'Stale values served because loading failed, timed out or Redis was down.',
      ['reason'],
    );
    const leases = counter(
      'lease_total',
      'Fill leases by result: acquired, contended, expired (lost while loading: expired, revoked or taken over).',
      ['result'],
    );
    const waits = counter(
      'follower_waits_total',
      'Callers that waited for another process to fill a key, by result (started, timeout).',
      ['result'],
    );
    const backoffs = counter(
      'backoffs_total',
      'Refresh backoffs started after a loader failure.',
      [],
    );
    const corrupt = counter(
      'corrupt_entries_total',
      'Stored entries that could not be decoded (read as misses).',
      [],
    );
    const storeErrors = counter('store_errors_total', 'Store commands that failed, by operation.', [
      'operation',
    ]);
    const takeovers = counter(
      'lease_takeovers_total',
      'Leases taken over from a holder that made no progress within waitTimeout (a stuck or dead owner elsewhere).',
      [],
    );
    const hedgesRefused = counter(
      'hedges_refused_total',
      'Takeovers of a holder deemed stuck that the hedge budget refused: the backend is slow for many keys at once.',
      [],
    );
    for (const result of ['ok', 'error', 'uncached'])
      for (const trigger of TRIGGERS) loads.inc({ cache, result, trigger }, 0);
    for (const trigger of TRIGGERS) {
      loaderErrors.inc({ cache, trigger }, 0);
      fenced.inc({ cache, trigger }, 0);
    }
    for (const reason of STALE_REASONS) staleOnError.inc({ cache, reason }, 0);
    for (const result of ['acquired', 'contended', 'expired']) leases.inc({ cache, result }, 0);
    for (const result of ['started', 'timeout']) waits.inc({ cache, result }, 0);
    for (const single of [coalesced, backoffs, corrupt, takeovers, hedgesRefused])
      single.inc({ cache }, 0);
    this.#collected = [
      gauge(
        'inflight_keys',
        'Keys with a load in progress in this process.',
        (engine) => engine.activity().inflight,
      ),
      gauge(
        'store_degraded',
        '1 while the store is degraded (Redis unreachable or breaker not closed), else 0.',
        (engine) => (engine.store.health().status === 'up' ? 0 : 1),
      ),
      gauge(
        'breaker_state',
        'Store circuit breaker: 0 closed, 1 half-open, 2 open.',
        (engine) => BREAKER_VALUE[engine.store.health().breaker],
      ),
    ];
    // A store without a near cache (memory) adds none of its metrics to the registry.
    if (nearCacheOf(engine.store) !== undefined) {
      const near = (engine: HerdEngine): NearCacheReport | undefined => nearCacheOf(engine.store);
      this.#collected.push(
        gauge(
          'near_cache_trusted',
          '1 while notifications are in time, so near-cache copies may answer hits; 0 while every read goes to Redis.',
          (engine) => {
            const report = near(engine);
            return report === undefined ? undefined : Number(report.trusted);
          },
        ),
        gauge(
          'near_cache_entries',
          'Keys held by the near cache.',
          (engine) => near(engine)?.entries,
        ),
        gauge(
          'near_cache_bytes',
          'Bytes held by the near cache, as counted against its maxBytes.',
          (engine) => near(engine)?.bytes,
        ),
        collectedCounter(
          'near_cache_reads_total',
          'Reads asked of the store (each a near-cache hit or a round trip to Redis).',
          (engine) => near(engine)?.reads,
        ),
        collectedCounter(
          'near_cache_hits_total',
          'Reads a near-cache copy answered without a round trip to Redis.',
          (engine) => near(engine)?.hits,
        ),
      );
    }
    for (const shared of this.#collected) {
      let sources = collectedSources.get(shared);
      if (sources === undefined) collectedSources.set(shared, (sources = new Map()));
      if (sources.has(cache)) {
        throw new ConfigurationError(
          'metrics.cacheName',
          `"${cache}" is already used by another cache in this registry; give each cache its own name`,
        );
      }
      sources.set(cache, engine);
    }

    // Reads are the hot path: bind their label sets once instead of hashing labels per event.
    const readCounters = {
      fresh: requests.labels({ cache, result: 'fresh' }),
      stale: requests.labels({ cache, result: 'stale' }),
      miss: requests.labels({ cache, result: 'miss' }),
      negative: requests.labels({ cache, result: 'negative' }),
    };
    for (const bound of Object.values(readCounters)) bound.inc(0);
    const readTimers = {
      fresh: requestSeconds.labels({ cache, path: 'fresh' }),
      stale: requestSeconds.labels({ cache, path: 'stale' }),
      miss: requestSeconds.labels({ cache, path: 'miss' }),
    };
    this.#unsubscribe = engine.onEvent((event: HerdEvent) => {
      switch (event.type) {
        case 'read':
          readCounters[event.negative && event.path !== 'miss' ? 'negative' : event.path].inc();
          readTimers[event.path].observe(event.durationMs / 1_000);
          break;
        case 'coalesced':
          coalesced.inc({ cache }, event.callers);
          break;
        case 'load-ok':
          loads.inc({ cache, result: 'ok', trigger: event.background ? 'refresh' : 'miss' });
          loaderSeconds.observe({ cache, result: 'ok' }, event.durationMs / 1_000);
          break;
        case 'load-fenced':
          fenced.inc({ cache, trigger: event.background ? 'refresh' : 'miss' });
          break;
        case 'load-failed': {
          const trigger = event.background ? 'refresh' : 'miss';
          // A client error (4xx) is the loader's answer, not a failure of the backend.
          const result = isLoaderFailure(event.error) ? 'error' : 'uncached';
          loads.inc({ cache, result, trigger });
          if (result === 'error') loaderErrors.inc({ cache, trigger });
          loaderSeconds.observe({ cache, result }, event.durationMs / 1_000);
          break;
        }
        case 'stale-on-error':
          staleOnError.inc({ cache, reason: event.reason });
          break;
        case 'lease-acquired':
          leases.inc({ cache, result: 'acquired' });
          break;
        case 'lease-contended':
          leases.inc({ cache, result: 'contended' });
          break;
        case 'lease-lost':
          leases.inc({ cache, result: 'expired' });
          break;
        case 'lease-takeover':
          takeovers.inc({ cache });
          break;
        case 'hedge-refused':
          hedgesRefused.inc({ cache });
          break;
        case 'wait':
          waits.inc({ cache, result: 'started' });
          break;
        case 'wait-timeout':
          waits.inc({ cache, result: 'timeout' });
          break;
        case 'backoff':
          backoffs.inc({ cache });
          break;
        case 'corrupt-entry':
          corrupt.inc({ cache });
          break;
        case 'store-error':
          storeErrors.inc({ cache, operation: event.operation });
          break;
      }
    });
  }

  /** Registers herd-guard's metrics for `engine` (loading prom-client on first use). */
  static async create(
    engine: HerdEngine,
    options: PrometheusMetricsOptions = {},
  ): Promise<PrometheusMetrics> {
    let client: PromClient;
    try {
      client = await import('prom-client');
    } catch (error) {
      throw new ConfigurationError(
        'metrics',
        `prom-client is not installed (npm install prom-client): ${error instanceof Error ? error.message : String(error)}`,
      );
    }
    return new PrometheusMetrics(client, engine, options);
  }

  /**
   * Stops recording this engine's events and removes it from the shared gauges. Metrics stay
   * registered.
   */
  close(): void {
    this.#unsubscribe();
    for (const shared of this.#collected) {
      collectedSources.get(shared)?.delete(this.#cacheName);
      shared.remove({ cache: this.#cacheName });
    }
  }

  /**
   * A metric already in the registry (from another cache of this app) is shared, not registered
   * twice.
   */
  #metric<M>(name: string, create: () => M): M {
    return (this.registry.getSingleMetric(name) as M | undefined) ?? create();
  }
}
