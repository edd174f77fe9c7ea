import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Module } from '@nestjs/common';
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { HerdGuardModule, type HerdGuardModuleOptions, HerdGuardService } from '../../lib/index.js';
import { deferred, flush, until } from '../helpers/deferred.js';
import { startContext } from '../helpers/nest-app.js';

/*
 * The default of the OpenTelemetry tracing is "never the raw key" (a key may hold personal data).
 * A span carries more than attributes: its status message and its exception events are exported
 * too.
 */
const KEY = 'user:alice@example.com';
const contextManager = new AsyncLocalStorageContextManager();
const exporter = new InMemorySpanExporter();

beforeAll(() => {
  context.setGlobalContextManager(contextManager.enable());
  trace.setGlobalTracerProvider(
    new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }),
  );
});

afterAll(() => {
  trace.disable();
  context.disable();
});

function appModule(options: HerdGuardModuleOptions) {
  @Module({ imports: [HerdGuardModule.forRoot(options)] })
  class AppModule {}
  return AppModule;
}

/** Every string a span exports: attributes, status message, events' attributes. */
function exported(span: ReadableSpan): string[] {
  return [
    ...Object.values(span.attributes).map(String),
    span.status.message ?? '',
    ...span.events.flatMap((event) => Object.values(event.attributes ?? {}).map(String)),
  ];
}

describe('OpenTelemetry without rawKeys', () => {
  it('keeps the raw key out of the status and exception events of a failed load and its waits', async () => {
    const pod = await startContext(appModule({ logging: false }));
    try {
      const cache = pod.get(HerdGuardService);
      const gate = deferred<void>();
      const load = async (): Promise<string> => {
        await gate.promise;
        throw new Error('database down');
      };
      const first = cache.getOrLoad(KEY, load);
      await flush();
      const second = cache.getOrLoad(KEY, load);
      await flush();
      gate.resolve();
      await expect(first).rejects.toThrow();
      await expect(second).rejects.toThrow();
      await until(() =>
        exporter.getFinishedSpans().some((span) => span.name === 'herd-guard.wait'),
      );
      const leaks = exporter
        .getFinishedSpans()
        .flatMap((span) => exported(span).filter((value) => value.includes(KEY)))
        .map((value) => value.slice(0, 120));
      expect(leaks).toEqual([]);
    } finally {
      await pod.close();
    }
  });
});
