import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Module } from '@nestjs/common';
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, type Span, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { HerdGuardModule, HerdGuardService } from '../../lib/index.js';
import { deferred, flush, sleep } from '../helpers/deferred.js';
import { startContext } from '../helpers/nest-app.js';

/*
 * Tracing is the app's, and so are its span processors: one that throws must not break a load nor
 * leave a rejection nobody handles (which ends a Node process by default).
 */
class ThrowingProcessor implements SpanProcessor {
  onStart(span: Span): void {
    if (span.name.startsWith('herd-guard.')) throw new Error('processor bug');
  }
  onEnd(): void {}
  forceFlush(): Promise<void> {
    return Promise.resolve();
  }
  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

const contextManager = new AsyncLocalStorageContextManager();
const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown): void => {
  unhandled.push(reason);
};

beforeAll(() => {
  context.setGlobalContextManager(contextManager.enable());
  trace.setGlobalTracerProvider(
    new BasicTracerProvider({ spanProcessors: [new ThrowingProcessor()] }),
  );
  process.on('unhandledRejection', onUnhandled);
});

afterAll(() => {
  process.off('unhandledRejection', onUnhandled);
  trace.disable();
  context.disable();
});

@Module({ imports: [HerdGuardModule.forRoot({ logging: false })] })
class AppModule {}

describe('OpenTelemetry with a span processor that throws', () => {
  it('answers every caller with the loaded value and leaves no unhandled rejection', async () => {
    const pod = await startContext(AppModule);
    try {
      const cache = pod.get(HerdGuardService);
      const gate = deferred<void>();
      let loads = 0;
      const load = async (): Promise<string> => {
        loads += 1;
        await gate.promise;
        return 'value';
      };
      const first = cache.getOrLoad('k', load).catch((error: unknown) => error);
      await flush();
      const second = cache.getOrLoad('k', load).catch((error: unknown) => error);
      await flush();
      gate.resolve();
      expect([await first, await second]).toEqual(['value', 'value']);
      await sleep(50);
      expect(loads).toBe(1);
      expect(unhandled.map(String)).toEqual([]);
    } finally {
      await pod.close();
    }
  });
});
