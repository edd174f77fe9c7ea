import { afterAll, afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import type { CachePolicy } from '../../lib/index.js';
import { sleep } from '../helpers/deferred.js';
import { type Pod, countedLoader, startPods, stopPods } from '../helpers/pods.js';
import { RedisServer, stopAllRedisServers } from '../helpers/redis-server.js';

const KEYS = ['a', 'b', 'c', 'd', 'e'];
const POLICY: CachePolicy = {
  soft: '200ms',
  hard: '1h',
  jitter: 0,
  waitTimeout: '2s',
  leaseTtl: '5s',
  backoff: { initial: '100ms', max: '400ms' },
};
const STORE = { commandTimeout: '200ms', breakerThreshold: 3, breakerCooldown: '300ms' };

let server: RedisServer;
let pods: Pod[] = [];

beforeEach(async () => {
  server = await RedisServer.start();
  pods = await startPods({
    count: 2,
    url: server.url,
    namespace: 'outage',
    policy: POLICY,
    store: STORE,
  });
});

afterEach(async () => {
  await stopPods(pods);
  await stopAllRedisServers();
});

afterAll(async () => {
  await stopAllRedisServers();
});

/** A loader per pod that records how many loads of one key run at the same time in that pod. */
function podLoader(pod: number, failing = false) {
  const running = new Map<string, number>();
  let maxConcurrent = 0;
  let calls = 0;
  const loaderFor = (key: string) => async (): Promise<string> => {
    calls += 1;
    const now = (running.get(key) ?? 0) + 1;
    running.set(key, now);
    maxConcurrent = Math.max(maxConcurrent, now);
    await sleep(20);
    running.set(key, (running.get(key) ?? 1) - 1);
    if (failing) throw new Error('backend down');
    return `pod${pod}-${key}-${calls}`;
  };
  return { loaderFor, stats: () => ({ calls, maxConcurrent }) };
}

/** Bursts of concurrent reads of every key from every pod, for `durationMs`. Returns the error count. */
async function traffic(
  durationMs: number,
  loaders: ReturnType<typeof podLoader>[],
  until?: () => boolean,
): Promise<{ errors: unknown[]; reads: number; values: Set<string> }> {
  const errors: unknown[] = [];
  const values = new Set<string>();
  let reads = 0;
  const stopAt = Date.now() + durationMs;
  while (Date.now() < stopAt && !(until?.() ?? false)) {
    const burst = pods.flatMap((pod, i) =>
      KEYS.flatMap((key) =>
        Array.from({ length: 10 }, () =>
          pod.engine.getOrLoad(key, loaders[i]!.loaderFor(key)).then(
            (value) => {
              reads += 1;
              values.add(value);
            },
            (error: unknown) => errors.push(error),
          ),
        ),
      ),
    );
    await Promise.all(burst);
    await sleep(10);
  }
  return { errors, reads, values };
}

describe('Redis outage', () => {
  it('keeps serving keys with a servable value while Redis is killed, loads coalesced per pod, and recovers after restart', async () => {
    const warm = countedLoader(() => 'v1');
    for (const key of KEYS) await pods[0]!.engine.getOrLoad(key, warm);
    for (const key of KEYS) await pods[1]!.engine.getOrLoad(key, warm); // pod 1 has now seen every key
    await sleep(250); // every key is stale now
    await server.kill();

    // The backend fails too: only the values the pods saw last can answer.
    const failing = [podLoader(0, true), podLoader(1, true)];
    const outage = await traffic(600, failing);
    expect(outage.errors).toEqual([]);
    expect(outage.values.size).toBe(1);
    expect(outage.values.has('v1')).toBe(true);

    // The backend is back, Redis is not: loads run, coalesced per pod.
    const loaders = [podLoader(0), podLoader(1)];
    const during = await traffic(600, loaders);
    expect(during.errors).toEqual([]);
    expect(during.reads).toBeGreaterThan(0);
    for (const loader of loaders) expect(loader.stats().maxConcurrent).toBe(1);
    expect(pods.map((pod) => pod.store.health().status)).toEqual(['degraded', 'degraded']);
    expect(pods.every((pod) => pod.engine.stats().storeErrors > 0)).toBe(true);

    await server.restart();
    const after = await traffic(10_000, loaders, () =>
      pods.every((pod) => pod.store.health().status === 'up'),
    );
    expect(after.errors).toEqual([]);
    expect(pods.map((pod) => pod.store.health())).toEqual([
      { status: 'up', breaker: 'closed' },
      { status: 'up', breaker: 'closed' },
    ]);

    // Leases and notifications work again (scripts reloaded, subscriber re-subscribed): one load.
    const cold = countedLoader(() => 'after-restart', 100);
    const values = await Promise.all(
      pods.flatMap((pod) =>
        Array.from({ length: 100 }, () => pod.engine.getOrLoad('cold-after-restart', cold)),
      ),
    );
    expect(values.every((value) => value === 'after-restart')).toBe(true);
    expect(cold.calls).toBe(1);
    expect(pods.reduce((sum, pod) => sum + pod.engine.stats().waits.timedOut, 0)).toBe(0);
  });

  it('stops waiting on a frozen Redis once the breaker opens, serving stale values meanwhile', async () => {
    const warm = countedLoader(() => 'v1');
    for (const pod of pods) for (const key of KEYS) await pod.engine.getOrLoad(key, warm);
    await sleep(250);
    server.freeze();
    try {
      const loaders = [podLoader(0), podLoader(1)];
      const during = await traffic(1_000, loaders);
      expect(during.errors).toEqual([]);
      expect(pods.map((pod) => pod.store.health().breaker)).not.toContain('closed');
    } finally {
      server.thaw();
    }
    const loaders = [podLoader(0), podLoader(1)];
    const after = await traffic(10_000, loaders, () =>
      pods.every((pod) => pod.store.health().status === 'up'),
    );
    expect(after.errors).toEqual([]);
    expect(pods.map((pod) => pod.store.health().status)).toEqual(['up', 'up']);
  });

  it('reports the breaker open in health while Redis is unreachable', async () => {
    await server.kill();
    const loader = countedLoader(() => 'loaded-without-redis');
    for (let i = 0; i < 5; i += 1) {
      await expect(pods[0]!.engine.getOrLoad(`k${i}`, loader)).resolves.toBe(
        'loaded-without-redis',
      );
    }
    expect(pods[0]!.store.health()).toMatchObject({ status: 'degraded', breaker: 'open' });
  });
});
