import { afterEach, describe, expect, it } from '@jest/globals';
import { HerdEngine } from '../../lib/index.js';
import { RedisStore } from '../../lib/redis.js';
import { HEARTBEAT_INTERVAL_MS } from '../../lib/stores/redis/redis.store.js';
import { deferred, sleep, until } from '../helpers/deferred.js';
import { FaultProxy, stopAllFaultProxies } from '../helpers/fault-proxy.js';
import { useRedisServer } from '../helpers/redis-fixture.js';
import { SplitConnections } from '../helpers/split-connections.js';

const redis = useRedisServer();

afterEach(async () => {
  await stopAllFaultProxies();
});

/** A pod: its own store (and so its own connections and fallback memory) and engine. */
async function pod(url: string, namespace: string, nearCache: boolean): Promise<HerdEngine> {
  return (await redis.pod({ url, namespace, commandTimeout: '100ms', nearCache })).engine;
}

/** How long a pod's near cache may trust copies after its notifications stop (1 s + commandTimeout). */
const TRUST_BOUND_MS = HEARTBEAT_INTERVAL_MS + 100;

describe.each([
  ['with the near cache off: at once', false],
  ['with the near cache on: past the stated bound', true],
])(
  'Redis store: an invalidation holds on a pod that hears of it late or not at all, %s',
  (_label, nearCache) => {
    /** With the near cache, a pod cut off may trust its copies up to the bound: wait it out. */
    const pastTheBound = async (): Promise<void> => {
      if (nearCache) await sleep(TRUST_BOUND_MS + 200);
    };

    it('does not serve as fresh a value another pod expired, while its own connection to Redis is cut', async () => {
      const proxy = await FaultProxy.start(redis.server);
      // Pod A reaches Redis through the proxy (commands and notifications alike); pod B directly.
      const namespace = `partition-${nearCache}`;
      const a = await pod(proxy.url, namespace, nearCache);
      const b = await pod(redis.server.url, namespace, nearCache);
      await expect(a.read('product:9', () => 'old name')).resolves.toMatchObject({ path: 'miss' });
      await expect(a.read('product:9', () => 'unused')).resolves.toMatchObject({
        value: 'old name',
        path: 'fresh',
      });

      // A's network to Redis goes silent; B updates the row and expires the key, and that resolves.
      proxy.blackhole();
      await expect(b.expire('product:9')).resolves.toBe(true);

      // README: "After any invalidation resolves, on any pod, no read on any pod returns a value loaded
      // before it as fresh". A cannot reach Redis, so it may answer from memory, but only as stale.
      try {
        await pastTheBound();
        const seen = await a.read('product:9', () => 'new name').catch((error: unknown) => error);
        expect(seen).not.toMatchObject({ value: 'old name', path: 'fresh' });
      } finally {
        proxy.restore();
      }
    });

    it('does not answer a read from an envelope a notification carried once another pod has invalidated the key', async () => {
      const proxy = await FaultProxy.start(redis.server);
      // Pod A: commands straight to Redis (always answered), notifications through the proxy.
      const client = new SplitConnections(
        { host: redis.server.host, port: redis.server.port },
        proxy.port,
      );
      redis.closeAfterTest({ close: async () => client.disconnect() });
      const storeA = new RedisStore({
        client,
        namespace: `window-${nearCache}`,
        nearCache,
        commandTimeout: '100ms',
      });
      redis.closeAfterTest(storeA);
      await storeA.ready(10_000);
      const a = new HerdEngine({ store: storeA, policy: { soft: '1h' } });
      redis.closeAfterTest(a);
      const b = await pod(redis.server.url, `window-${nearCache}`, nearCache);

      // A loads k slowly (its fill watch is registered meanwhile); B writes k, which A hears about.
      const gate = deferred<string>();
      let loading = false;
      const slow = a
        .getOrLoad('k', () => {
          loading = true;
          return gate.promise;
        })
        .catch((error: unknown) => error);
      await until(() => loading, 5_000, 'A to start loading');
      const heard = storeA.watchFill('k');
      await b.set('k', 'v1');
      await expect(heard.next(5_000)).resolves.toBe(true);
      heard.close();

      // B expires k; the notification of it is slow to reach A (pub/sub is a hint), A's commands are not.
      proxy.pause('toClient');
      try {
        await expect(b.expire('k')).resolves.toBe(true);
        await pastTheBound();
        const seen = await a.read('k', () => 'reloaded');
        expect(seen).not.toMatchObject({ value: 'v1', path: 'fresh' });
      } finally {
        proxy.resume('toClient');
        gate.resolve('old');
        await slow;
      }
    });
  },
);
