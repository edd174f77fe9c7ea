import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { HerdEngine, type HerdEngineOptions, decodeEntry } from '../../lib/index.js';
import { RedisStore, type RedisStoreOptions } from '../../lib/redis.js';
import { counted } from '../helpers/counted.js';
import { eventually } from '../helpers/deferred.js';
import { RedisSentinelFixture, stopAllRedisServers } from '../helpers/redis-server.js';

/*
 * Redis Sentinel, for real: a primary, its replica and three Sentinels, all processes this file
 * starts. The pods connect through the Sentinels (ioredis `sentinels` + `name`).
 */

let sentinel: RedisSentinelFixture;
let run = 0;
const opened: Array<{ engine: HerdEngine; store: RedisStore }> = [];

beforeAll(async () => {
  sentinel = await RedisSentinelFixture.start({ downAfterMs: 500, failoverTimeoutMs: 2_000 });
});

afterEach(async () => {
  for (const pod of opened.splice(0)) {
    await pod.engine.close();
    await pod.store.close();
  }
});

afterAll(async () => {
  await stopAllRedisServers();
});

/** `count` pods on one namespace, connected through the Sentinels. */
async function pods(count: number, options: Partial<RedisStoreOptions> = {}) {
  run += 1;
  const started = Array.from({ length: count }, () => {
    const store = new RedisStore({
      redisOptions: { sentinels: sentinel.sentinels, name: sentinel.masterName },
      namespace: `sentinel${run}`,
      commandTimeout: 300,
      breakerCooldown: '200ms',
      ...options,
    });
    const policy: HerdEngineOptions['policy'] = { soft: '1h', waitTimeout: '5s' };
    return { store, engine: new HerdEngine({ store, policy }) };
  });
  opened.push(...started);
  expect(await Promise.all(started.map((pod) => pod.store.ready(10_000)))).toEqual(
    started.map(() => true),
  );
  return started;
}

type Pod = Awaited<ReturnType<typeof pods>>[number];

/** Every pod's callers on a cold key: one load for all of them. */
async function herd(all: readonly Pod[], key: string) {
  const loader = counted(async () => `${key} loaded`);
  const answers = await Promise.all(
    all.flatMap((pod) => Array.from({ length: 20 }, () => pod.engine.getOrLoad(key, loader))),
  );
  return { answers: new Set(answers), loads: loader.calls };
}

/** Reads `keys` on every pod until `done` settles; every read must answer (fresh or stale). */
async function readThrough(all: readonly Pod[], keys: readonly string[], done: Promise<unknown>) {
  let settled = false;
  void done.finally(() => (settled = true));
  const answers: unknown[] = [];
  const degraded = new Set<string>();
  while (!settled) {
    for (const pod of all) {
      for (const key of keys) answers.push(await pod.engine.getOrLoad(key, () => 'reloaded'));
      const health = pod.store.health();
      if (health.status !== 'up') degraded.add(health.reason ?? health.status);
    }
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  await done;
  return { answers: new Set(answers), degraded };
}

describe('Redis Sentinel: a primary, a replica, three Sentinels', () => {
  it('keeps answering through SENTINEL FAILOVER, then follows the new primary', async () => {
    const all = await pods(3);
    await all[0]!.engine.set('price', 100);
    for (const pod of all) await expect(pod.engine.getOrLoad('price', () => 0)).resolves.toBe(100);
    const before = await sentinel.primary();

    // Answered throughout: from the copies, or (a copy dropped when its subscription was cut) by a
    // load in the pod while the store is not reachable.
    const { answers } = await readThrough(all, ['price'], sentinel.failover());
    expect([...answers].filter((answer) => answer !== 'reloaded')).toEqual([100]);
    expect(await sentinel.primary()).not.toBe(before);

    // A pod learns of the failover from its next write (READONLY), and moves to the new primary.
    for (const [i, pod] of all.entries())
      await eventually(
        () =>
          pod.engine.set(`moved${i}`, true).then(
            () => true,
            () => false,
          ),
        10_000,
        `pod ${i} writing to the new primary`,
      );
    // On the new primary: healthy again, one load per key for all pods, invalidations reach all.
    await eventually(async () => all.every((pod) => pod.store.health().status === 'up'), 10_000);
    await expect(herd(all, 'cold')).resolves.toEqual({
      answers: new Set(['cold loaded']),
      loads: 1,
    });
    await all[1]!.engine.set('price', 200);
    await eventually(
      async () =>
        (await Promise.all(all.map((pod) => pod.engine.getOrLoad('price', () => 0)))).every(
          (price) => price === 200,
        ),
      5_000,
      'every pod serving the new price',
    );
  });

  it('with waitForReplicas: 1, does not acknowledge a write the replica did not take', async () => {
    const [pod] = await pods(1, { waitForReplicas: 1 });
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
    const all = await pods(3, { waitForReplicas: 1 });
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
    expect([...answers].filter((answer) => answer !== 'reloaded').sort()).toEqual([300, 7]);
    expect(degraded.size).toBeGreaterThan(0);

    await eventually(async () => all.every((pod) => pod.store.health().status === 'up'), 10_000);
    for (const pod of all)
      await expect(pod.engine.read('price', () => 0)).resolves.toMatchObject({ value: 300 });
    await expect(herd(all, 'after')).resolves.toEqual({
      answers: new Set(['after loaded']),
      loads: 1,
    });
  });
});
