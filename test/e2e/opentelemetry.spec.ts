import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable, type INestApplicationContext, Module } from '@nestjs/common';
import { context, metrics, type Span, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { isTracingSuppressed } from '@opentelemetry/core';
import {
  type DataPoint,
  MeterProvider,
  MetricReader,
  type ResourceMetrics,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { Redis } from 'ioredis';
import { HerdGuardModule, type HerdGuardModuleOptions, HerdGuardService } from '../../lib/index.js';
import { deferred, flush, until } from '../helpers/deferred.js';
import { startContext } from '../helpers/nest-app.js';
import { RedisServer, stopAllRedisServers } from '../helpers/redis-server.js';

/** A MetricReader the test collects by hand. */
class CollectingReader extends MetricReader {
  protected override onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected override onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}

const KEY = 'user:alice@example.com';
const CALLERS = 300;
const contextManager = new AsyncLocalStorageContextManager();
const exporter = new InMemorySpanExporter();
const reader = new CollectingReader();
const app = trace.getTracer('app');
let server: RedisServer;

/** Every Redis command sent, with what an ioredis instrumentation would see of its context. */
const commands: { name: string; suppressed: boolean; span: string | undefined }[] = [];
const sendCommand = Redis.prototype.sendCommand;

beforeAll(async () => {
  context.setGlobalContextManager(contextManager.enable());
  trace.setGlobalTracerProvider(
    new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }),
  );
  metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));
  // A fake ioredis instrumentation: it records the context each command is sent in.
  Redis.prototype.sendCommand = function (
    this: Redis,
    ...args: Parameters<Redis['sendCommand']>
  ): ReturnType<Redis['sendCommand']> {
    const active = context.active();
    const span = trace.getSpan(active) as (Span & { name?: string }) | undefined;
    commands.push({
      name: args[0].name,
      suppressed: isTracingSuppressed(active),
      span: span?.name,
    });
    return sendCommand.apply(this, args);
  };
  server = await RedisServer.start();
});

afterEach(() => {
  exporter.reset();
  commands.length = 0;
});

afterAll(async () => {
  Redis.prototype.sendCommand = sendCommand;
  trace.disable();
  metrics.disable();
  context.disable();
  await stopAllRedisServers();
});

@Injectable()
class Profiles {
  readonly gate = deferred<void>();
  runs = 0;
  /** Whether the loader ran with tracing suppressed (it must not). */
  suppressed: boolean | undefined;

  constructor(readonly cache: HerdGuardService) {}

  /** One request: a span of its own, reading the profile through the cache. */
  read(): Promise<string> {
    return app.startActiveSpan('request', async (span) => {
      try {
        return await this.cache.getOrLoad(KEY, () =>
          app.startActiveSpan('db.query', async (query) => {
            this.runs += 1;
            this.suppressed = isTracingSuppressed(context.active());
            await this.gate.promise;
            query.end();
            return 'profile of alice';
          }),
        );
      } finally {
        span.end();
      }
    });
  }
}

function appModule(options: HerdGuardModuleOptions) {
  @Module({ imports: [HerdGuardModule.forRoot(options)], providers: [Profiles] })
  class AppModule {}
  return AppModule;
}

/** Starts `count` requests, each in a macrotask of its own (as HTTP requests arrive). */
async function herd(pod: INestApplicationContext, count: number): Promise<Promise<string>[]> {
  const reads: Promise<string>[] = [];
  for (let i = 0; i < count; i += 1) {
    reads.push(pod.get(Profiles).read());
    await flush();
  }
  return reads;
}

function named(name: string): ReadableSpan[] {
  return exporter.getFinishedSpans().filter((span) => span.name === name);
}

function parentOf(span: ReadableSpan): string | undefined {
  return span.parentSpanContext?.spanId;
}

function linkedTo(span: ReadableSpan): string[] {
  return span.links.map((link) => link.context.spanId);
}

async function collect(): Promise<ResourceMetrics> {
  const { resourceMetrics, errors } = await reader.collect();
  expect(errors).toEqual([]);
  return resourceMetrics;
}

/** The value of `name`'s point whose attributes include `attributes` (summed over the rest). */
function pointOf(
  collected: ResourceMetrics,
  name: string,
  attributes: Record<string, string> = {},
): DataPoint<unknown>[] {
  const metric = collected.scopeMetrics
    .flatMap((scope) => scope.metrics)
    .find((candidate) => candidate.descriptor.name === name);
  const points = (metric?.dataPoints ?? []) as DataPoint<unknown>[];
  return points.filter((point) =>
    Object.entries(attributes).every(([field, value]) => point.attributes[field] === value),
  );
}

function sum(points: DataPoint<unknown>[]): number {
  return points.reduce((total, point) => total + (point.value as number), 0);
}

/** No attribute of any span holds the raw key. */
function expectNoRawKey(): void {
  for (const span of exporter.getFinishedSpans()) {
    for (const value of Object.values(span.attributes)) expect(String(value)).not.toContain(KEY);
  }
}

describe('OpenTelemetry', () => {
  it('records one load span for 300 concurrent callers and 299 waits linked to it (memory)', async () => {
    const pod = await startContext(appModule({ logging: false }));
    try {
      const profiles = pod.get(Profiles);
      const reads = await herd(pod, CALLERS);
      profiles.gate.resolve();
      await expect(Promise.all(reads)).resolves.toEqual(Array(CALLERS).fill('profile of alice'));
      await until(() => named('herd-guard.wait').length === CALLERS - 1);

      expect(profiles.runs).toBe(1);
      expect(profiles.suppressed).toBe(false);
      const [load, ...moreLoads] = named('herd-guard.load');
      expect(moreLoads).toEqual([]);
      expect(load?.attributes).toMatchObject({
        'herd_guard.cache': 'default',
        'herd_guard.trigger': 'miss',
        'herd_guard.result': 'miss',
        'herd_guard.lease': 'acquired',
        'herd_guard.attempts': 1,
        'herd_guard.fenced': false,
        'herd_guard.waited': false,
      });
      expect(load?.attributes['herd_guard.key.hash']).toMatch(/^[0-9a-f]{16}$/);
      expect(load?.attributes['herd_guard.key']).toBeUndefined();
      expectNoRawKey();
      const loadId = load?.spanContext().spanId;
      // The loader's own span is a child of the load span, which is a child of a request.
      const [query] = named('db.query');
      expect(parentOf(query as ReadableSpan)).toBe(loadId);
      const requests = new Map(named('request').map((span) => [span.spanContext().spanId, span]));
      expect(requests.has(parentOf(load as ReadableSpan) as string)).toBe(true);
      // Every other caller waited, in its own request's trace, linked to the load.
      const waits = named('herd-guard.wait');
      expect(waits.every((wait) => linkedTo(wait).join() === loadId)).toBe(true);
      expect(waits.every((wait) => wait.attributes['herd_guard.result'] === 'miss')).toBe(true);
      const waitParents = new Set(waits.map(parentOf));
      expect(waitParents.size).toBe(CALLERS - 1);
      expect([...waitParents].every((id) => requests.has(id as string))).toBe(true);
      expect(waitParents.has(parentOf(load as ReadableSpan))).toBe(false);

      const collected = await collect();
      expect(sum(pointOf(collected, 'herd_guard.requests', { result: 'miss' }))).toBe(CALLERS);
      expect(sum(pointOf(collected, 'herd_guard.loads', { result: 'ok' }))).toBe(1);
      expect(sum(pointOf(collected, 'herd_guard.coalesced'))).toBe(CALLERS - 1);
      expect(sum(pointOf(collected, 'herd_guard.leases', { result: 'acquired' }))).toBe(1);
      const [histogram] = pointOf(collected, 'herd_guard.loader.duration', { result: 'ok' });
      expect((histogram?.value as { count: number }).count).toBe(1);
    } finally {
      await pod.close();
    }
  });

  it('links waits to the load on two pods over Redis and keeps its own commands untraced', async () => {
    const module = appModule({ redis: server.url, namespace: 'otel-pods', logging: false });
    const pods = [await startContext(module), await startContext(module)];
    try {
      const gate = deferred<void>();
      for (const pod of pods) (pod.get(Profiles) as { gate: typeof gate }).gate = gate;
      const reads = [
        ...(await herd(pods[0] as INestApplicationContext, CALLERS / 2)),
        ...(await herd(pods[1] as INestApplicationContext, CALLERS / 2)),
      ];
      // Every caller joined its pod's fill, and one pod's fill waits for the other's load.
      const stats = () => pods.map((pod) => pod.get(HerdGuardService).stats());
      await until(
        () =>
          stats().reduce((sum, { coalesced }) => sum + coalesced, 0) === CALLERS - 2 &&
          stats().some(({ waits }) => waits.started === 1),
      );
      gate.resolve();
      await expect(Promise.all(reads)).resolves.toEqual(Array(CALLERS).fill('profile of alice'));
      await until(() => named('herd-guard.wait').length === CALLERS - 1);

      expect(pods.map((pod) => pod.get(Profiles).runs).sort()).toEqual([0, 1]);
      const [load, ...moreLoads] = named('herd-guard.load');
      expect(moreLoads).toEqual([]);
      expect(load?.attributes).toMatchObject({ 'herd_guard.namespace': 'otel-pods' });
      expectNoRawKey();
      const loadId = load?.spanContext().spanId as string;
      const waits = named('herd-guard.wait');
      // The other pod's fill waited for the load elsewhere: its first caller's span says so.
      const remote = waits.filter((wait) => wait.attributes['herd_guard.wait.source'] === 'remote');
      expect(remote).toHaveLength(1);
      expect(remote[0]?.attributes['herd_guard.lease']).toBe('waited');
      const remoteId = remote[0]?.spanContext().spanId as string;
      // The callers that joined a fill in their pod link to it: the load, or the remote wait.
      const linked = (id: string) => waits.filter((wait) => linkedTo(wait).includes(id)).length;
      expect(linked(loadId)).toBe(CALLERS / 2 - 1);
      expect(linked(remoteId)).toBe(CALLERS / 2 - 1);

      // Only the callers' reads (MGET) are sent in their request's context; every other command
      // herd-guard sent (lease scripts, fill, re-checks, release, heartbeats) ran with tracing
      // suppressed.
      const traced = commands.filter((command) => !command.suppressed);
      const suppressed = commands.filter((command) => command.suppressed);
      expect(new Set(traced.map(({ name, span }) => `${name} in ${span}`))).toEqual(
        new Set(['mget in request']),
      );
      expect(suppressed.map(({ name }) => name)).toContain('evalsha');
    } finally {
      for (const pod of pods) await pod.close();
    }
  });

  it('puts the raw key in spans only when asked to', async () => {
    const pod = await startContext(appModule({ logging: false, telemetry: { rawKeys: true } }));
    try {
      const profiles = pod.get(Profiles);
      profiles.gate.resolve();
      await profiles.read();
      const [load] = named('herd-guard.load');
      expect(load?.attributes['herd_guard.key']).toBe(KEY);
      expect(load?.attributes['herd_guard.key.hash']).toBeUndefined();
    } finally {
      await pod.close();
    }
  });

  it('records an error on the load span when the loader fails', async () => {
    const pod = await startContext(appModule({ logging: false }));
    try {
      const cache = pod.get(HerdGuardService);
      await expect(
        cache.getOrLoad('broken', () => Promise.reject(new Error('database down'))),
      ).rejects.toThrow();
      const [load] = named('herd-guard.load');
      expect(load?.status).toMatchObject({ code: 2, message: 'database down' });
      expect(load?.events.map((event) => event.name)).toContain('exception');
    } finally {
      await pod.close();
    }
  });

  it('records no span and no metric when telemetry is off', async () => {
    const pod = await startContext(appModule({ logging: false, telemetry: false }));
    try {
      const profiles = pod.get(Profiles);
      profiles.gate.resolve();
      await Promise.all([profiles.read(), profiles.read()]);
      expect(named('herd-guard.load')).toEqual([]);
      expect(named('herd-guard.wait')).toEqual([]);
    } finally {
      await pod.close();
    }
  });
});
