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

/** Registers the SDK's tracer and meter providers once per process (they cost a hit nothing). */
function registerProviders(): void {
  if (registered) return;
  registered = true;
  trace.setGlobalTracerProvider(
    new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(new DroppingExporter())] }),
  );
  metrics.setGlobalMeterProvider(new MeterProvider({ readers: [new IdleReader()] }));
}

/**
 * The SDK's context manager, on only while an OpenTelemetry contender is measured: its
 * AsyncLocalStorage installs process-wide promise hooks (on Node 20) that every promise of every
 * contender would pay for, about 100 ns per awaited call.
 */
const contextManager = new AsyncLocalStorageContextManager();
let contextUsers = 0;

/** Switches the SDK's context manager on for one user (a pod), and off when no user is left. */
export class OtelContext {
  #on = false;

  on(): void {
    if (this.#on) return;
    this.#on = true;
    registerProviders();
    contextUsers += 1;
    if (contextUsers === 1) {
      context.setGlobalContextManager(contextManager.enable());
      // An app's SDK runs every request in a context (its HTTP instrumentation), which leaves the
      // AsyncLocalStorage enabled from the first one on: so here.
      context.with(context.active(), () => undefined);
    }
  }

  off(): void {
    if (!this.#on) return;
    this.#on = false;
    contextUsers -= 1;
    // Disables the manager (its AsyncLocalStorage, so the promise hooks go) and unregisters it.
    if (contextUsers === 0) context.disable();
  }
}

/** herd-guard's OpenTelemetry on `engine`, as the module opens it (tracing and metrics by default). */
export function openTelemetry(
  engine: HerdEngine,
  options: { readonly tracing?: boolean; readonly metrics?: boolean } = {},
): Telemetry {
  registerProviders();
  return new Telemetry(api, engine, options, { cacheName: 'bench', namespace: undefined });
}
