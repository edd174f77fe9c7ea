import { describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import { PrometheusMetrics } from '../../lib/index.js';
import { parsePrometheusText, sampleValue } from '../helpers/prometheus-text.js';
import { useRedisServer } from '../helpers/redis-fixture.js';

const redis = useRedisServer();

describe('near-cache metrics of the Redis store', () => {
  it('counts reads and the hits a trusted copy answered, and reports the copies held', async () => {
    const pod = await redis.pod({ url: redis.server.url, namespace: 'near-metrics' });
    const registry = new Registry();
    const metrics = await PrometheusMetrics.create(pod.engine, { registry, cacheName: 'near' });
    const scrape = async () => parsePrometheusText(await registry.metrics());
    await pod.engine.getOrLoad('k', async () => 'v');
    const before = await scrape();
    await expect(pod.engine.getOrLoad('k', async () => 'unused')).resolves.toBe('v');
    const after = await scrape();
    const delta = (name: string): number =>
      sampleValue(after, name, { cache: 'near' }) - sampleValue(before, name, { cache: 'near' });
    expect(delta('herd_guard_near_cache_reads_total')).toBe(1);
    expect(delta('herd_guard_near_cache_hits_total')).toBe(1);
    expect(sampleValue(after, 'herd_guard_near_cache_trusted', { cache: 'near' })).toBe(1);
    expect(sampleValue(after, 'herd_guard_near_cache_entries', { cache: 'near' })).toBe(1);
    expect(sampleValue(after, 'herd_guard_near_cache_bytes', { cache: 'near' })).toBeGreaterThan(0);
    expect(pod.store.nearCache).toMatchObject({
      reads: sampleValue(after, 'herd_guard_near_cache_reads_total'),
      hits: sampleValue(after, 'herd_guard_near_cache_hits_total'),
    });
    metrics.close();
  });
});
