import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { LoadContext } from '../../lib/index.js';
import { deferred, eventually, until } from '../helpers/deferred.js';
import { countedLoader, startPods, stopPods } from '../helpers/pods.js';
import { RedisClusterFixture, stopAllRedisServers } from '../helpers/redis-server.js';

let cluster: RedisClusterFixture;

beforeAll(async () => {
  cluster = await RedisClusterFixture.start();
});

afterAll(async () => {
  await stopAllRedisServers();
});

describe('Redis Cluster (3 masters)', () => {
  it('loads once for 8 pods x 250 callers on a cold key, and after hard expiry', async () => {
    const pods = await startPods({
      count: 8,
      clusterNodes: cluster.nodes,
      namespace: 'cluster',
      policy: { soft: '100ms', hard: '200ms', jitter: 0 },
    });
    try {
      const loader = countedLoader((call) => `v${call}`, 100);
      const herd = (key: string): Promise<string[]> =>
        Promise.all(
          pods.flatMap((pod) =>
            Array.from({ length: 250 }, () => pod.engine.getOrLoad(key, loader)),
          ),
        );
      await expect(herd('cold')).resolves.toEqual(Array(2_000).fill('v1'));
      expect(loader.calls).toBe(1);
      await new Promise((resolve) => setTimeout(resolve, 300));
      await expect(herd('cold')).resolves.toEqual(Array(2_000).fill('v2'));
      expect(loader.calls).toBe(2);
      expect(pods.reduce((sum, pod) => sum + pod.engine.stats().waits.timedOut, 0)).toBe(0);
    } finally {
      await stopPods(pods);
    }
  });

  it('fences a first load whose loader adds a tag (in another slot) that another pod invalidates while it loads', async () => {
    const pods = await startPods({
      count: 2,
      clusterNodes: cluster.nodes,
      namespace: 'cluster-late-tag',
      policy: { soft: '1h', jitter: 0 },
    });
    try {
      const [a, b] = pods;
      const gate = deferred();
      let started = false;
      const first = a!.engine.getOrLoad('doc:1', async (context: LoadContext<string>) => {
        started = true;
        await gate.promise;
        context.setPolicy({ tags: ['owner:7'] });
        return 'v1';
      });
      await until(() => started, 5_000, 'the load to start');
      await b!.engine.deleteTag('owner:7');
      gate.resolve();
      await expect(first).resolves.toBe('v1');
      const next = countedLoader(() => 'v2');
      await expect(b!.engine.getOrLoad('doc:1', next)).resolves.toBe('v2');
      await expect(a!.engine.getOrLoad('doc:1', next)).resolves.toBe('v2');
      expect(next.calls).toBe(1);
      // Loaded after the invalidation, the value is stored under the tag.
      expect(await a!.engine.deleteTag('owner:7')).toBe(1);
    } finally {
      await stopPods(pods);
    }
  });

  it('spreads keys over the slots and keeps each key with its lease and tags working', async () => {
    const pods = await startPods({
      count: 2,
      clusterNodes: cluster.nodes,
      namespace: 'cluster2',
      policy: { soft: '1h' },
    });
    try {
      const keys = Array.from({ length: 30 }, (_, i) => `product:${i}`);
      for (const key of keys)
        await pods[0]!.engine.getOrLoad(key, async () => key, { tags: ['products'] });
      for (const key of keys)
        await expect(pods[1]!.engine.read(key, async () => 'wrong')).resolves.toMatchObject({
          value: key,
          path: 'fresh',
        });
      await expect(pods[1]!.engine.expireTag('products')).resolves.toBe(30);
      // The other pod's near cache hears of it within a notification's travel time.
      await eventually(
        async () => (await pods[0]!.engine.peek('product:7'))?.path === 'stale',
        2_000,
        'pod 0 to see the expiry',
      );
      await expect(
        pods[0]!.engine.read('product:7', async () => 'refreshed'),
      ).resolves.toMatchObject({
        value: 'product:7',
        path: 'stale',
      });
      // Keys landed on more than one master.
      const holders = await Promise.all(
        cluster.servers.map(async (server) => {
          const client = server.client();
          try {
            return Number(await client.dbsize());
          } finally {
            client.disconnect();
          }
        }),
      );
      expect(holders.filter((count) => count > 0).length).toBeGreaterThan(1);
    } finally {
      await stopPods(pods);
    }
  });
});
