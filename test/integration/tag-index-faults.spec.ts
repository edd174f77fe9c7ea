import { afterEach, describe, expect, it } from '@jest/globals';
import type { RedisStoreOptions } from '../../lib/redis.js';
import { deferred, eventually } from '../helpers/deferred.js';
import { FaultProxy, stopAllFaultProxies } from '../helpers/fault-proxy.js';
import { type RedisPod, useRedisServer } from '../helpers/redis-fixture.js';
import { splitPod } from '../helpers/split-pod.js';

/**
 * A tagged value whose tag index write failed must not be served fresh beyond the reach of
 * expireTag(): the write is retried, or the value stored stale, or (loaded without a lease) it is
 * dropped when Redis answers again. DESIGN (Invalidation model): "After an invalidation resolves on
 * any pod, no pod serves a value loaded before it as fresh."
 */

const STORE: Omit<RedisStoreOptions, 'url' | 'namespace'> = {
  commandTimeout: 200,
  breakerThreshold: 100,
  breakerCooldown: 200,
};
let run = 0;
const redis = useRedisServer();

afterEach(async () => {
  await stopAllFaultProxies();
});

/** Resolves once Redis answers the pod's commands again (its connection may be reconnecting). */
async function answersAgain(pod: RedisPod): Promise<void> {
  await eventually(
    () =>
      pod.store.indexMembers({ tag: 'probe' }).then(
        () => true,
        () => false,
      ),
    10_000,
    'Redis to answer the pod again',
  );
}

describe('a tag index write lost before the load', () => {
  it('is written again once the loader returns, so expireTag() on another pod reaches the value', async () => {
    const namespace = `tag-index${(run += 1)}`;
    const proxy = await FaultProxy.start(redis.server);
    const loading = await redis.pod({ namespace, url: proxy.url, ...STORE });
    const other = await redis.pod({ namespace, url: redis.server.url, ...STORE });

    // Once pod A holds the lease, what it sends is lost until its tag index write has failed.
    const indexFailed = deferred();
    loading.engine.onEvent((event) => {
      if (event.type === 'lease-acquired') proxy.blackhole({ direction: 'toServer' });
      if (event.type === 'store-error' && event.operation === 'index-tag') indexFailed.resolve();
    });
    const gate = deferred<string>();
    const loaded = loading.engine.read('k', () => gate.promise, { tags: ['t'] });
    await indexFailed.promise;
    proxy.restore();
    await answersAgain(loading);
    gate.resolve('v');
    await expect(loaded).resolves.toMatchObject({ value: 'v' });

    await expect(other.engine.expireTag('t')).resolves.toBe(1);
    await expect(other.engine.read('k', async () => 'reloaded')).resolves.not.toMatchObject({
      value: 'v',
      path: 'fresh',
    });
  });
});

describe('a tagged value loaded while its commands were lost (no lease, no index)', () => {
  it('is not served fresh by the pod that loaded it once Redis answers again, though its subscription never dropped', async () => {
    const namespace = `tag-partition${(run += 1)}`;
    const commands = await FaultProxy.start(redis.server);
    const loading = await splitPod(redis, {
      namespace,
      commandPort: commands.port,
      subscriberPort: redis.server.port,
      store: STORE,
    });
    const other = await redis.pod({ namespace, url: redis.server.url, ...STORE });
    // What pod A sends is lost (its notifications still arrive): it loads the key without a lease,
    // and its tag index write fails.
    commands.blackhole({ direction: 'toServer' });
    let indexFailed = false;
    loading.engine.onEvent((event) => {
      if (event.type === 'store-error' && event.operation === 'index-tag') indexFailed = true;
    });
    await expect(
      loading.engine.read('k', async () => 'loaded while cut off', { tags: ['t'] }),
    ).resolves.toMatchObject({ value: 'loaded while cut off' });
    expect(indexFailed).toBe(true);
    commands.restore();
    await answersAgain(loading);

    await other.engine.expireTag('t');
    await expect(
      loading.engine.read('k', async () => 'reloaded', { tags: ['t'] }),
    ).resolves.not.toMatchObject({ value: 'loaded while cut off', path: 'fresh' });
  });
});
