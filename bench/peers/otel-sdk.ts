/**
 * An OpenTelemetry SDK as an app registers it (NodeSDK does the same): an AsyncLocalStorage context
 * manager, a tracer provider whose processor hands every span to an exporter, and a meter provider
 * with a reader. The exporter drops what it gets and the reader is never collected: the bench
 * measures what recording costs herd-guard, not an export.
 */
import { context, metrics, trace } from '@opentelemetry/api';
import * as api from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  type ReadableSpan,
  SimpleSpanProcessor,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import type { HerdEngine } from '../../lib/index.js';
import { Telemetry } from '../../lib/telemetry/telemetry.js';

class DroppingExporter implements SpanExporter {
  spans = 0;
  export(spans: ReadableSpan[], done: (result: { code: 0 }) => void): void {
    this.spans += spans.length;
    done({ code: 0 });
  }
  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

class IdleReader extends MetricReader {
  protected override onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected override onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}

let registered = false;

/** Registers the SDK once per process. */
export function registerOtelSdk(): void {
  if (registered) return;
  registered = true;
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(
    new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(new DroppingExporter())] }),
  );
  metrics.setGlobalMeterProvider(new MeterProvider({ readers: [new IdleReader()] }));
}

/** herd-guard's OpenTelemetry on `engine`, as the module opens it (tracing and metrics by default). */
export function openTelemetry(
  engine: HerdEngine,
  options: { readonly tracing?: boolean; readonly metrics?: boolean } = {},
): Telemetry {
  registerOtelSdk();
  return new Telemetry(api, engine, options, { cacheName: 'bench', namespace: undefined });
}
