import { afterEach, describe, expect, it } from '@jest/globals';
import type { HerdEngine } from '../../lib/index.js';
import type { RedisStoreOptions } from '../../lib/redis.js';
import { counted } from '../helpers/counted.js';
import { type Deferred, deferred, eventually, sleep, until } from '../helpers/deferred.js';
import { stopAllFaultProxies } from '../helpers/fault-proxy.js';
import { type RedisPod, useRedisServer } from '../helpers/redis-fixture.js';

/**
 * A value loaded without a lease (Redis could not be asked) is this pod's own fallback while Redis
 * cannot answer, and never more: DESIGN (Near cache) "a copy made without the store's word [...] is
 * the loading pod's own stale fallback, never fresh for anyone once the store answers again, and it
 * is reconciled (dropped or revalidated) when the store comes back, whether or not the connection
 * dropped".
 */

const STORE = {
  commandTimeout: 200,
  breakerThreshold: 2,
  breakerCooldown: 200,
} satisfies Omit<RedisStoreOptions, 'url' | 'namespace'>;
let run = 0;
const redis = useRedisServer();

afterEach(async () => {
  await stopAllFaultProxies();
  if (redis.server.isFrozen) redis.server.thaw();
});

async function twoPods(): Promise<[RedisPod, RedisPod]> {
  const namespace = `leaseless${(run += 1)}`;
  const options = { namespace, url: redis.server.url, ...STORE };
  return [await redis.pod(options), await redis.pod(options)];
}

async function bothUp(pods: readonly RedisPod[]): Promise<void> {
  await until(
    () => pods.every((pod) => pod.store.health().status === 'up'),
    10_000,
    'both pods to be up again',
  );
}

/** A loader held until the test releases it, with whether it has been called. */
function held(): {
  loader: () => Promise<string>;
  called: () => boolean;
  release: Deferred<string>;
} {
  const release = deferred<string>();
  let called = false;
  return {
    loader: () => {
      called = true;
      return release.promise;
    },
    called: () => called,
    release,
  };
}

/** Redis goes away (frozen, or killed) and comes back (thawed, or restarted empty). */
const outages: ReadonlyArray<[string, () => Promise<void> | void, () => Promise<void> | void]> = [
  [
    'frozen (SIGSTOP), its connections kept',
    () => redis.server.freeze(),
    () => redis.server.thaw(),
  ],
  ['killed and restarted empty', () => redis.server.kill(), () => redis.server.restart()],
];

function expectNotFresh(engine: HerdEngine, key: string, value: string) {
  return expect(engine.read(key, async () => 'reloaded')).resolves.not.toMatchObject({
    value,
    path: 'fresh',
  });
}

describe('a load that ran without a lease while Redis was away', () => {
  it.each(outages)(
    'does not replace, when it ends after Redis is back (%s), a value another pod wrote or deleted since',
    async (_label, goAway, comeBack) => {
      const [loading, writer] = await twoPods();
      await goAway();
      // Pod A loads two keys it cannot ask Redis about: without a lease, its loaders held.
      const first = held();
      const second = held();
      const loads = [
        loading.engine.read('k1', first.loader),
        loading.engine.read('k2', second.loader),
      ];
      await until(() => first.called() && second.called(), 5_000, 'both loads to start');
      await comeBack();
      await bothUp([loading, writer]);

      // Another pod writes one key and deletes the other; pod A serves the new value.
      await writer.engine.set('k1', 'new');
      await writer.engine.delete('k2');
      await eventually(
        async () => (await loading.engine.peek('k1'))?.value === 'new',
        5_000,
        'pod A to serve the new value',
      );

      // Pod A's loads end now, with what they read before the write and the delete.
      first.release.resolve('old');
      second.release.resolve('old');
      await Promise.all(loads);
      await expectNotFresh(loading.engine, 'k1', 'old');
      await expectNotFresh(loading.engine, 'k2', 'old');
      await expect(loading.engine.peek('k1')).resolves.toMatchObject({ value: 'new' });
    },
  );

  it('drops what it loaded during a stall once Redis answers again, though its subscription never dropped', async () => {
    const [loading, writer] = await twoPods();
    await writer.engine.set('k', 'stored');
    await writer.engine.expire('k');
    await loading.engine.peek('k');
    redis.server.freeze();
    // Pod A finds its copy stale and reloads it without a lease; the load ends during the stall.
    const reload = held();
    await expect(loading.engine.read('k', reload.loader)).resolves.toMatchObject({
      value: 'stored',
      path: 'stale',
    });
    await until(() => reload.called(), 5_000, 'the reload to start');
    reload.release.resolve('loaded during the stall');
    await until(() => loading.engine.activity().inflight === 0, 5_000, 'the reload to end');
    redis.server.thaw();
    await bothUp([loading, writer]);

    // Redis, which says the key is stale, answers again: the value loaded without its word is
    // nobody's fresh value now, not even pod A's.
    await expectNotFresh(loading.engine, 'k', 'loaded during the stall');
  });
});

describe('a read Redis cannot answer, of a key this pod saw invalidated', () => {
  it('does not join the load that began before the invalidation: it loads anew', async () => {
    const [pod] = await twoPods();
    // A load of the key holds the lease, its loader held; then the pod deletes the key.
    const before = held();
    const first = pod.engine.read('k', before.loader);
    await until(() => before.called(), 5_000, 'the first load to start');
    await pod.engine.delete('k');

    // Redis stalls; the pod reads the key again (without a copy, it saw the delete last).
    redis.server.freeze();
    const after = held();
    const second = pod.engine.read('k', after.loader);
    await Promise.race([
      until(() => after.called(), 5_000, 'the second load to start'),
      sleep(3 * STORE.commandTimeout),
    ]);
    after.release.resolve('loaded after the delete');
    redis.server.thaw();
    before.release.resolve('loaded before the delete');
    await expect(second).resolves.toMatchObject({ value: 'loaded after the delete' });
    await expect(first).resolves.toMatchObject({ value: 'loaded before the delete' });
  });
});

describe('a read Redis cannot answer, of a key this pod holds a copy of', () => {
  it('is answered with the copy as stale; its refresh, leased once Redis is back, keeps the value Redis holds', async () => {
    // Without near-cache hits every read goes to Redis; the copy only answers while Redis cannot.
    const options = { namespace: `leaseless${(run += 1)}`, url: redis.server.url, ...STORE };
    const pod = await redis.pod({ ...options, nearCache: false });
    const other = await redis.pod(options);
    await pod.engine.set('k', 'stored');
    redis.server.freeze();
    const reload = counted(async () => 'reloaded');
    await expect(pod.engine.read('k', reload)).resolves.toMatchObject({
      value: 'stored',
      path: 'stale',
    });
    // Redis is back before the refresh of that stale answer asks for the lease (on the next turn).
    redis.server.thaw();
    await until(() => pod.engine.activity().inflight === 0, 5_000, 'the refresh to end');

    // Redis held a fresh value all along, the very one the copy was: nothing to load over it.
    expect(reload.calls).toBe(0);
    await expect(other.engine.read('k', async () => 'never')).resolves.toMatchObject({
      value: 'stored',
      path: 'fresh',
    });
  });
});
