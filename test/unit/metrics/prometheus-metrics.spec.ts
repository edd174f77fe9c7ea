import { describe, expect, it } from '@jest/globals';
import { BadRequestException, ServiceUnavailableException } from '@nestjs/common';
import { Registry } from 'prom-client';
import { HerdEngine, MemoryStore, PrometheusMetrics } from '../../../lib/index.js';
import { deferred, flush, until } from '../../helpers/deferred.js';
import { memoryEngine } from '../../helpers/engine.js';

function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  const wanted = Object.entries(labels).map(([label, value]) => `${label}="${value}"`);
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    const labelPart = line.slice(name.length + 1, line.indexOf('}'));
    const present = labelPart.split(',');
    if (wanted.every((pair) => present.includes(pair)))
      return Number(line.slice(line.indexOf('}') + 2));
  }
  return undefined;
}

describe('PrometheusMetrics', () => {
  it('counts reads by result, loads, coalesced callers and loader durations in the given registry', async () => {
    const registry = new Registry();
    const engine = memoryEngine({ policy: { negativeTtl: '1m' } });
    const metrics = await PrometheusMetrics.create(engine, { registry });
    await Promise.all(Array.from({ length: 5 }, () => engine.getOrLoad('k', async () => 'v')));
    await engine.getOrLoad('k', async () => 'v');
    await engine.getOrLoad('missing', async () => null);
    await engine.getOrLoad('missing', async () => null);
    await engine
      .getOrLoad('broken', async () => Promise.reject(new Error('x')))
      .catch(() => undefined);
    const text = await registry.metrics();
    expect(sample(text, 'herd_guard_requests_total', { cache: 'default', result: 'miss' })).toBe(6);
    expect(sample(text, 'herd_guard_requests_total', { cache: 'default', result: 'fresh' })).toBe(
      1,
    );
    expect(
      sample(text, 'herd_guard_requests_total', { cache: 'default', result: 'negative' }),
    ).toBe(1);
    expect(sample(text, 'herd_guard_coalesced_total', { cache: 'default' })).toBe(4);
    expect(sample(text, 'herd_guard_loads_total', { result: 'ok', trigger: 'miss' })).toBe(2);
    expect(sample(text, 'herd_guard_loader_errors_total', { trigger: 'miss' })).toBe(1);
    expect(sample(text, 'herd_guard_loader_duration_seconds_count', { result: 'ok' })).toBe(2);
    expect(sample(text, 'herd_guard_lease_total', { result: 'acquired' })).toBe(3);
    expect(sample(text, 'herd_guard_inflight_keys', { cache: 'default' })).toBe(0);
    expect(sample(text, 'herd_guard_store_degraded', { cache: 'default' })).toBe(0);
    expect(text).not.toContain('missing');
    metrics.close();
  });

  it('counts a loader that answers with a client error (HttpException 4xx) as uncached, not as a loader error', async () => {
    const registry = new Registry();
    const engine = memoryEngine();
    const metrics = await PrometheusMetrics.create(engine, { registry });
    await engine
      .getOrLoad('k', async () => Promise.reject(new BadRequestException('bad id')))
      .catch(() => undefined);
    await engine
      .getOrLoad('k', async () => Promise.reject(new ServiceUnavailableException()))
      .catch(() => undefined);
    const text = await registry.metrics();
    expect(sample(text, 'herd_guard_loads_total', { result: 'uncached', trigger: 'miss' })).toBe(1);
    expect(sample(text, 'herd_guard_loads_total', { result: 'error', trigger: 'miss' })).toBe(1);
    expect(sample(text, 'herd_guard_loader_errors_total', { trigger: 'miss' })).toBe(1);
    metrics.close();
  });

  it('lets two caches share one registry, told apart by the cache label', async () => {
    const registry = new Registry();
    const first = memoryEngine();
    const second = memoryEngine();
    const a = await PrometheusMetrics.create(first, { registry, cacheName: 'products' });
    const b = await PrometheusMetrics.create(second, { registry, cacheName: 'users' });
    await first.getOrLoad('k', async () => 1);
    await second.getOrLoad('k', async () => 1);
    await second.getOrLoad('k', async () => 1);
    const text = await registry.metrics();
    expect(sample(text, 'herd_guard_requests_total', { cache: 'products', result: 'miss' })).toBe(
      1,
    );
    expect(sample(text, 'herd_guard_requests_total', { cache: 'users', result: 'fresh' })).toBe(1);
    expect(sample(text, 'herd_guard_inflight_keys', { cache: 'users' })).toBe(0);
    a.close();
    b.close();
  });

  it('counts a lease taken over from a stuck owner, and not a lease won without one', async () => {
    const registry = new Registry();
    const store = new MemoryStore();
    const owner = new HerdEngine({ store, policy: { leaseTtl: '10s' } });
    const follower = new HerdEngine({ store, policy: { waitTimeout: '30ms' } });
    const metrics = await PrometheusMetrics.create(follower, { registry });
    const takeovers = async (): Promise<number | undefined> =>
      sample(await registry.metrics(), 'herd_guard_lease_takeovers_total', { cache: 'default' });
    await follower.getOrLoad('free', async () => 'v');
    expect(await takeovers()).toBe(0);
    const gate = deferred<string>();
    const stuck = owner.getOrLoad('k', () => gate.promise);
    await flush();
    await expect(follower.getOrLoad('k', async () => 'taken over')).resolves.toBe('taken over');
    expect(await takeovers()).toBe(1);
    gate.resolve('late');
    await stuck;
    metrics.close();
    await Promise.all([owner.close(), follower.close()]);
  });

  it('counts a takeover the hedge budget refused: two stuck holders at once, one hedge', async () => {
    const registry = new Registry();
    const store = new MemoryStore();
    const owner = new HerdEngine({ store, policy: { leaseTtl: '10s' } });
    // A cold key's holder is deemed stuck after 1 s; one takes the budget's only hedge.
    const follower = new HerdEngine({ store, policy: { waitTimeout: '10s' } });
    const metrics = await PrometheusMetrics.create(follower, { registry });
    const count = async (name: string): Promise<number | undefined> =>
      sample(await registry.metrics(), name, { cache: 'default' });
    expect(await count('herd_guard_hedges_refused_total')).toBe(0);
    const gate = deferred<string>();
    const stuck = [
      owner.getOrLoad('a', () => gate.promise),
      owner.getOrLoad('b', () => gate.promise),
    ];
    await flush();
    let refused = 0;
    follower.onEvent((event) => {
      if (event.type === 'hedge-refused') refused += 1;
    });
    const answers = Promise.all([
      follower.getOrLoad('a', async () => 'taken over'),
      follower.getOrLoad('b', async () => 'taken over'),
    ]);
    await until(() => refused >= 1, 5_000, 'a hedge to be refused');
    expect(await count('herd_guard_hedges_refused_total')).toBe(refused);
    gate.resolve('late');
    // The key refused a hedge keeps waiting for its holder, and gets its value.
    expect([...(await answers)].sort()).toEqual(['late', 'taken over']);
    expect(await count('herd_guard_lease_takeovers_total')).toBe(1);
    await Promise.all(stuck);
    metrics.close();
    await Promise.all([owner.close(), follower.close()]);
  });

  it('exports every counter series with a known label value at 0 before its first event', async () => {
    const registry = new Registry();
    const metrics = await PrometheusMetrics.create(memoryEngine(), { registry });
    const text = await registry.metrics();
    for (const reason of ['loader-failed', 'loader-timeout', 'wait-timeout', 'store-down'])
      expect(sample(text, 'herd_guard_stale_served_on_error_total', { reason })).toBe(0);
    for (const trigger of ['miss', 'refresh'])
      expect(sample(text, 'herd_guard_loader_errors_total', { trigger })).toBe(0);
    for (const result of ['fresh', 'stale', 'miss', 'negative'])
      expect(sample(text, 'herd_guard_requests_total', { result })).toBe(0);
    expect(sample(text, 'herd_guard_follower_waits_total', { result: 'timeout' })).toBe(0);
    expect(sample(text, 'herd_guard_lease_takeovers_total', { cache: 'default' })).toBe(0);
    // The memory store has no near cache: none of its metrics are registered.
    expect(text).not.toContain('near_cache');
    metrics.close();
  });

  it('rejects a prefix Prometheus would not accept', async () => {
    await expect(
      PrometheusMetrics.create(memoryEngine(), { registry: new Registry(), prefix: 'bad-prefix' }),
    ).rejects.toMatchObject({
      field: 'metrics.prefix',
    });
  });
});
