import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { decodeEntry } from '../../lib/index.js';
import type { RedisStoreOptions } from '../../lib/redis.js';
import {
  FailoverPods,
  fromTheStore,
  herd,
  readThrough,
  untilAllServe,
  untilAllUp,
  untilEachWrites,
} from '../helpers/failover.js';
import { RedisSentinelFixture, stopAllRedisServers } from '../helpers/redis-server.js';

/*
 * Redis Sentinel, for real: a primary, its replica and three Sentinels, all processes this file
 * starts. The pods connect through the Sentinels (ioredis `sentinels` + `name`).
 */

let sentinel: RedisSentinelFixture;
let run = 0;
const pods = new FailoverPods();

beforeAll(async () => {
  sentinel = await RedisSentinelFixture.start({ downAfterMs: 500, failoverTimeoutMs: 2_000 });
});

afterEach(async () => {
  await pods.closeAll();
});

afterAll(async () => {
  await stopAllRedisServers();
});

/** `count` pods on one namespace, connected through the Sentinels. */
function start(count: number, options: Partial<RedisStoreOptions> = {}) {
  run += 1;
  return pods.start(count, {
    redisOptions: { sentinels: sentinel.sentinels, name: sentinel.masterName },
    namespace: `sentinel${run}`,
    ...options,
  });
}

describe('Redis Sentinel: a primary, a replica, three Sentinels', () => {
  it('keeps answering through SENTINEL FAILOVER, then follows the new primary', async () => {
    const all = await start(3);
    await all[0]!.engine.set('price', 100);
    for (const pod of all) await expect(pod.engine.getOrLoad('price', () => 0)).resolves.toBe(100);
    const before = await sentinel.primary();

    // Answered throughout: from the copies, or (a copy dropped when its subscription was cut) by a
    // load in the pod while the store is not reachable.
    const { answers } = await readThrough(all, ['price'], sentinel.failover());
    expect(fromTheStore(answers)).toEqual([100]);
    expect(await sentinel.primary()).not.toBe(before);

    await untilEachWrites(all);
    await untilAllUp(all);
    await expect(herd(all, 'cold')).resolves.toEqual({
      answers: new Set(['cold loaded']),
      loads: 1,
    });
    await all[1]!.engine.set('price', 200);
    await untilAllServe(all, 'price', 200);
  });

  it('with waitForReplicas: 1, does not acknowledge a write the replica did not take', async () => {
    const [pod] = await start(1, { waitForReplicas: 1 });
    await expect(pod!.engine.set('k', 'confirmed')).resolves.toBeUndefined();
    const replica = sentinel.other(await sentinel.primary());
    replica.freeze();
    try {
      await expect(pod!.engine.set('k', 'unconfirmed')).rejects.toThrow(
        /0 of 1 replicas confirmed it/,
      );
    } finally {
      replica.thaw();
    }
  });

  it('loses no acknowledged write when the primary is killed; answers meanwhile; health says so', async () => {
    const all = await start(3, { waitForReplicas: 1 });
    await all[0]!.engine.set('price', 100);
    await all[0]!.engine.getOrLoad('stock', () => 7);
    for (const pod of all) await pod.engine.getOrLoad('price', () => 0);
    await all[1]!.engine.set('price', 300);
    // Acknowledged: the replica has it before the primary dies.
    const replica = sentinel.other(await sentinel.primary());
    const raw = replica.client();
    const envelope = await raw.get(all[0]!.store.keys.for('price').value);
    raw.disconnect();
    expect(decodeEntry(envelope)).toMatchObject({ value: 300 });

    const { answers, degraded } = await readThrough(
      all,
      ['price', 'stock'],
      sentinel.killPrimary(),
    );
    expect(fromTheStore(answers).sort()).toEqual([300, 7]);
    expect(degraded.size).toBeGreaterThan(0);

    await untilAllUp(all);
    for (const pod of all)
      await expect(pod.engine.read('price', () => 0)).resolves.toMatchObject({ value: 300 });
    await expect(herd(all, 'after')).resolves.toEqual({
      answers: new Set(['after loaded']),
      loads: 1,
    });
  });
});
