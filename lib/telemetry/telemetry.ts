import type { HerdEngine } from '../core/herd-engine.js';
import type { HerdGuardTelemetryOptions } from '../interfaces/herd-guard-telemetry-options.interface.js';
import { type OtelApi, SUPPRESS_TRACING_KEY } from './otel-api.js';
import { OtelLoadTracer } from './otel-load-tracer.js';
import { OtelMetrics } from './otel-metrics.js';

/** What a cache's spans and metrics are named after. */
export interface TelemetryNames {
  readonly cacheName: string;
  readonly namespace: string | undefined;
}

/** One cache's OpenTelemetry tracing and metrics, opened once `@opentelemetry/api` is loaded. */
export class Telemetry {
  readonly #tracer: OtelLoadTracer | undefined;
  readonly #metrics: OtelMetrics | undefined;

  constructor(
    api: OtelApi,
    engine: HerdEngine,
    options: HerdGuardTelemetryOptions,
    names: TelemetryNames,
  ) {
    this.#tracer =
      options.tracing === false
        ? undefined
        : new OtelLoadTracer(api, engine, {
            cacheName: names.cacheName,
            namespace: names.namespace,
            rawKeys: options.rawKeys === true,
          });
    this.#metrics =
      options.metrics === false ? undefined : new OtelMetrics(api, engine, names.cacheName);
  }

  get tracing(): boolean {
    return this.#tracer !== undefined;
  }

  get metrics(): boolean {
    return this.#metrics !== undefined;
  }

  close(): void {
    this.#tracer?.close();
    this.#metrics?.close();
  }
}

/**
 * Runs `open` under a context that suppresses tracing: what it starts (a store's connections,
 * heartbeats and subscriptions) sends its commands untraced, as long as it lives.
 */
export function untraced<T>(api: OtelApi, open: () => T): T {
  const { context, createContextKey } = api;
  return context.with(
    context.active().setValue(createContextKey(SUPPRESS_TRACING_KEY), true),
    open,
  );
}
