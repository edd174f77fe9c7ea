import type {
  Attributes,
  Counter,
  Histogram,
  Meter,
  Observable,
  ObservableCallback,
  ObservableResult,
} from '@opentelemetry/api';
import type { HerdEngine } from '../core/herd-engine.js';
import type { HerdStore } from '../core/herd-store.interface.js';
import { isLoaderFailure } from '../errors/loader-failure.js';
import type { NearCacheReport } from '../stores/redis/near-cache.js';
import type { OtelApi } from './otel-api.js';

/** Loader duration buckets in seconds, the Prometheus histogram's. */
const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const BREAKER_VALUE = { closed: 0, 'half-open': 1, open: 2 } as const;

/** The near cache of a store that has one (the Redis store), read through its `nearCache` getter. */
function nearCacheOf(store: HerdStore): NearCacheReport | undefined {
  const report = (store as { readonly nearCache?: unknown }).nearCache;
  return typeof report === 'object' && report !== null ? (report as NearCacheReport) : undefined;
}

/**
 * herd-guard's Prometheus measurements as OpenTelemetry metrics, on the global MeterProvider
 * (meter `herd-guard`). Reads are not counted per hit: the request counters are observed from the
 * engine's own counters at collection, so a hit does no OpenTelemetry work. Load-path counters and
 * the loader duration histogram come from the engine's events. Every point has the attribute
 * `herd_guard.cache`; keys are never attributes.
 */
export class OtelMetrics {
  readonly #unsubscribe: () => void;
  readonly #removeObservers: () => void;

  constructor(api: OtelApi, engine: HerdEngine, cacheName: string) {
    const meter: Meter = api.metrics.getMeter('herd-guard');
    const cache: Attributes = { 'herd_guard.cache': cacheName };
    const counter = (name: string, description: string): Counter =>
      meter.createCounter(name, { description });
    const loaderSeconds: Histogram = meter.createHistogram('herd_guard.loader.duration', {
      description: 'Loader duration, for p50/p95/p99.',
      unit: 's',
      advice: { explicitBucketBoundaries: BUCKETS },
    });
    const loads = counter(
      'herd_guard.loads',
      'Loader runs by result (ok, error, uncached) and trigger (miss, refresh).',
    );
    const loaderErrors = counter('herd_guard.loader.errors', 'Loader runs that failed.');
    const fenced = counter(
      'herd_guard.loads.fenced',
      'Loads whose value was not stored because the key was invalidated while they ran.',
    );
    const coalesced = counter(
      'herd_guard.coalesced',
      'Callers that joined a load already running in this process.',
    );
    const staleOnError = counter(
      'herd_guard.stale_served_on_error',
      'Stale values served because loading failed, timed out or Redis was down, by reason.',
    );
    const leases = counter(
      'herd_guard.leases',
      'Fill leases by result: acquired, contended, expired.',
    );
    const takeovers = counter(
      'herd_guard.lease.takeovers',
      'Leases taken over from a holder that made no progress within waitTimeout.',
    );
    const hedgesRefused = counter(
      'herd_guard.hedges.refused',
      'Takeovers of a holder deemed stuck that the hedge budget refused (the backend is slow for many keys).',
    );
    const waits = counter(
      'herd_guard.follower.waits',
      'Callers that waited for another process to fill a key, by result (started, timeout).',
    );
    const backoffs = counter('herd_guard.backoffs', 'Refresh backoffs after a loader failure.');
    const corrupt = counter('herd_guard.corrupt_entries', 'Stored entries that could not be read.');
    const storeErrors = counter('herd_guard.store.errors', 'Failed store commands, by operation.');
    const labels = (extra: Attributes): Attributes => ({ ...cache, ...extra });
    // Reads are counted from the engine's counters at collection (see `requests` below): hits do
    // no work for this listener.
    this.#unsubscribe = engine.onEvent(
      (event) => {
        switch (event.type) {
          case 'read':
            return;
          case 'coalesced':
            coalesced.add(event.callers, cache);
            return;
          case 'load-ok':
            loads.add(1, labels({ result: 'ok', trigger: event.background ? 'refresh' : 'miss' }));
            loaderSeconds.record(event.durationMs / 1_000, labels({ result: 'ok' }));
            return;
          case 'load-fenced':
            fenced.add(1, labels({ trigger: event.background ? 'refresh' : 'miss' }));
            return;
          case 'load-failed': {
            const trigger = event.background ? 'refresh' : 'miss';
            const result = isLoaderFailure(event.error) ? 'error' : 'uncached';
            loads.add(1, labels({ result, trigger }));
            if (result === 'error') loaderErrors.add(1, labels({ trigger }));
            loaderSeconds.record(event.durationMs / 1_000, labels({ result }));
            return;
          }
          case 'stale-on-error':
            staleOnError.add(1, labels({ reason: event.reason }));
            return;
          case 'lease-acquired':
            leases.add(1, labels({ result: 'acquired' }));
            return;
          case 'lease-contended':
            leases.add(1, labels({ result: 'contended' }));
            return;
          case 'lease-lost':
            leases.add(1, labels({ result: 'expired' }));
            return;
          case 'lease-takeover':
            takeovers.add(1, cache);
            return;
          case 'hedge-refused':
            hedgesRefused.add(1, cache);
            return;
          case 'wait':
            waits.add(1, labels({ result: 'started' }));
            return;
          case 'wait-timeout':
            waits.add(1, labels({ result: 'timeout' }));
            return;
          case 'backoff':
            backoffs.add(1, cache);
            return;
          case 'corrupt-entry':
            corrupt.add(1, cache);
            return;
          case 'store-error':
            storeErrors.add(1, labels({ operation: event.operation }));
            return;
        }
      },
      { reads: false },
    );

    // Read at collection time, from the engine's counters and state.
    const requests = meter.createObservableCounter('herd_guard.requests', {
      description: 'Reads by result: fresh, stale or miss.',
    });
    const negative = meter.createObservableCounter('herd_guard.requests.negative', {
      description:
        'Reads answered with a cached "not found" (also counted in herd_guard.requests).',
    });
    const inflight = meter.createObservableGauge('herd_guard.inflight_keys', {
      description: 'Keys with a load in progress in this process.',
    });
    const degraded = meter.createObservableGauge('herd_guard.store.degraded', {
      description: '1 while the store is degraded (Redis unreachable or breaker not closed).',
    });
    const breaker = meter.createObservableGauge('herd_guard.breaker.state', {
      description: 'Store circuit breaker: 0 closed, 1 half-open, 2 open.',
    });
    const observeRequests = (result: ObservableResult): void => {
      const { reads } = engine.stats();
      result.observe(reads.fresh, labels({ result: 'fresh' }));
      result.observe(reads.stale, labels({ result: 'stale' }));
      result.observe(reads.miss, labels({ result: 'miss' }));
    };
    const observeNegative = (result: ObservableResult): void =>
      result.observe(engine.stats().reads.negative, cache);
    const observeInflight = (result: ObservableResult): void =>
      result.observe(engine.activity().inflight, cache);
    const observeDegraded = (result: ObservableResult): void =>
      result.observe(engine.store.health().status === 'up' ? 0 : 1, cache);
    const observeBreaker = (result: ObservableResult): void =>
      result.observe(BREAKER_VALUE[engine.store.health().breaker], cache);
    const removals: (() => void)[] = [];
    const observe = (instrument: Observable, callback: ObservableCallback): void => {
      instrument.addCallback(callback);
      removals.push(() => instrument.removeCallback(callback));
    };
    observe(requests, observeRequests);
    observe(negative, observeNegative);
    observe(inflight, observeInflight);
    observe(degraded, observeDegraded);
    observe(breaker, observeBreaker);
    if (nearCacheOf(engine.store) !== undefined) {
      const near = (read: (report: NearCacheReport) => number) => (result: ObservableResult) => {
        const report = nearCacheOf(engine.store);
        if (report !== undefined) result.observe(read(report), cache);
      };
      observe(
        meter.createObservableGauge('herd_guard.near_cache.trusted', {
          description: '1 while near-cache copies may answer hits.',
        }),
        near((report) => Number(report.trusted)),
      );
      observe(
        meter.createObservableGauge('herd_guard.near_cache.entries', {
          description: 'Keys held by the near cache.',
        }),
        near((report) => report.entries),
      );
      observe(
        meter.createObservableGauge('herd_guard.near_cache.bytes', {
          description: 'Bytes held by the near cache.',
          unit: 'By',
        }),
        near((report) => report.bytes),
      );
      observe(
        meter.createObservableCounter('herd_guard.near_cache.reads', {
          description: 'Reads asked of the store.',
        }),
        near((report) => report.reads),
      );
      observe(
        meter.createObservableCounter('herd_guard.near_cache.hits', {
          description: 'Reads a near-cache copy answered without a round trip to Redis.',
        }),
        near((report) => report.hits),
      );
    }
    this.#removeObservers = () => {
      for (const remove of removals) remove();
    };
  }

  /** Stops recording and observing this engine. */
  close(): void {
    this.#unsubscribe();
    this.#removeObservers();
  }
}
