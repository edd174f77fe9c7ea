import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it } from '@jest/globals';
import type { INestApplicationContext, LoggerService } from '@nestjs/common';
import { Registry } from 'prom-client';
import {
  HerdGuardHealthIndicator,
  HerdGuardModule,
  HerdGuardService,
  MemoryStore,
  type StoreHealth,
} from '../../../lib/index.js';
import { startContext } from '../../helpers/nest-app.js';

class RecordingLogger implements LoggerService {
  readonly messages: unknown[] = [];
  log(message: unknown): void {
    this.messages.push(message);
  }
  error(message: unknown): void {
    this.messages.push(message);
  }
  warn(message: unknown): void {
    this.messages.push(message);
  }
  debug(message: unknown): void {
    this.messages.push(message);
  }
}

class DegradedStore extends MemoryStore {
  override health(): StoreHealth {
    return { status: 'degraded', breaker: 'open', reason: 'connect ECONNREFUSED' };
  }
}

let context: INestApplicationContext | undefined;

afterEach(async () => {
  await context?.close();
  context = undefined;
});

describe('HerdGuardModule observability', () => {
  it('registers Prometheus metrics in the registry the app passes, labelled with the namespace', async () => {
    const registry = new Registry();
    context = await startContext(
      HerdGuardModule.forRoot({ namespace: 'shop', metrics: { registry }, logging: false }),
    );
    const cache = context.get(HerdGuardService);
    await cache.getOrLoad('k', async () => 1);
    await cache.getOrLoad('k', async () => 1);
    const text = await registry.metrics();
    expect(text).toContain('herd_guard_requests_total{cache="shop",result="miss"} 1');
    expect(text).toContain('herd_guard_requests_total{cache="shop",result="fresh"} 1');
  });

  it('reports the hottest keys in the metrics snapshot, not in labels', async () => {
    context = await startContext(
      HerdGuardModule.forRoot({ logging: false, hotKeys: { rawKeys: true } }),
    );
    const cache = context.get(HerdGuardService);
    for (let i = 0; i < 5; i += 1) await cache.getOrLoad('hot', async () => 'h');
    await cache.getOrLoad('cold', async () => 'c');
    const snapshot = cache.metrics(1);
    expect(snapshot.hotKeys.requested).toEqual([{ key: 'hot', count: 5, error: 0 }]);
    expect(snapshot.hotKeys.refreshed).toHaveLength(1);
    expect(snapshot.reads).toEqual({ fresh: 4, stale: 0, miss: 2, negative: 0 });
    expect(snapshot.store).toEqual({ name: 'memory', status: 'up', breaker: 'closed' });
  });

  it('names the hottest keys by the hash their OpenTelemetry spans carry, not by the keys', async () => {
    const key = 'http:GET /account?token=s3cr3t&email=alice@example.com';
    context = await startContext(HerdGuardModule.forRoot({ logging: false, hotKeys: 8 }));
    const cache = context.get(HerdGuardService);
    await cache.getOrLoad(key, async () => 'a');
    await cache.getOrLoad(key, async () => 'a');
    const hash = createHash('sha256').update(key).digest('hex').slice(0, 16);
    const { hotKeys } = cache.metrics(1);
    expect(hotKeys).toEqual({
      requested: [{ key: `#${hash}`, count: 2, error: 0 }],
      refreshed: [{ key: `#${hash}`, count: 1, error: 0 }],
    });
    expect(JSON.stringify(hotKeys)).not.toMatch(/s3cr3t|alice/);
  });

  it('can run without the hot-key summary', async () => {
    context = await startContext(HerdGuardModule.forRoot({ hotKeys: 0, logging: false }));
    const cache = context.get(HerdGuardService);
    await cache.getOrLoad('k', async () => 1);
    expect(cache.metrics().hotKeys).toEqual({ requested: [], refreshed: [] });
  });

  it('logs loads and fallbacks through the logger the app passes', async () => {
    const logger = new RecordingLogger();
    context = await startContext(HerdGuardModule.forRoot({ logging: logger }));
    await context.get(HerdGuardService).getOrLoad('k', async () => 1);
    expect(logger.messages).toEqual([
      expect.objectContaining({ event: 'lease acquired', key: 'k' }),
      expect.objectContaining({ event: 'loaded', key: 'k', trigger: 'miss' }),
    ]);
  });

  it('reports health up, degraded, or down when asked to fail on degraded', async () => {
    context = await startContext(HerdGuardModule.forRoot({ logging: false }));
    await expect(context.get(HerdGuardHealthIndicator).isHealthy('cache')).resolves.toEqual({
      cache: { status: 'up', store: 'memory', storeStatus: 'up', breaker: 'closed', inflight: 0 },
    });
    await context.close();
    context = await startContext(
      HerdGuardModule.forRoot({ store: new DegradedStore(), logging: false }),
    );
    const health = context.get(HerdGuardHealthIndicator);
    await expect(health.isHealthy()).resolves.toMatchObject({
      herdGuard: {
        status: 'degraded',
        storeStatus: 'degraded',
        breaker: 'open',
        reason: 'connect ECONNREFUSED',
      },
    });
    await expect(health.isHealthy('cache', { failWhenDegraded: true })).resolves.toMatchObject({
      cache: { status: 'down' },
    });
  });

  it('reports a degraded store as up with degradedAs: up, for terminus 11, which knows only up and down', async () => {
    context = await startContext(
      HerdGuardModule.forRoot({ store: new DegradedStore(), logging: false }),
    );
    const result = await context
      .get(HerdGuardHealthIndicator)
      .isHealthy('cache', { degradedAs: 'up' });
    // Typed without 'degraded', so terminus 11's HealthIndicatorResult accepts it.
    const status: 'up' | 'down' = result.cache.status;
    expect(status).toBe('up');
    expect(result.cache).toMatchObject({
      storeStatus: 'degraded',
      breaker: 'open',
      reason: 'connect ECONNREFUSED',
    });
  });

  it.each([
    [{ metrics: 'yes' }, 'metrics'],
    [{ logging: 42 }, 'logging'],
    [{ hotKeys: -1 }, 'hotKeys'],
    [{ hotKeys: 1.5 }, 'hotKeys'],
    [{ hotKeys: { capacity: -1 } }, 'hotKeys.capacity'],
    [{ hotKeys: { rawKeys: 'yes' } }, 'hotKeys.rawKeys'],
    [{ hotKeys: { size: 8 } }, 'hotKeys.size'],
  ])('fails the bootstrap on %p naming %s', async (options, field) => {
    await expect(startContext(HerdGuardModule.forRoot(options as never))).rejects.toMatchObject({
      field,
    });
  });
});
