import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { decodeEntry } from '../../lib/index.js';
import type { RedisStoreOptions } from '../../lib/redis.js';
import {
  type FailoverPod,
  FailoverPods,
  fromTheStore,
  herd,
  readThrough,
  untilAllServe,
  untilAllUp,
  untilEachWrites,
} from '../helpers/failover.js';
import {
  RedisClusterFixture,
  type RedisServer,
  stopAllRedisServers,
} from '../helpers/redis-server.js';

/*
 * A Redis Cluster with replicas, for real: 3 masters and a replica each, all processes this file
 * starts, a node timeout of 1 s. One master is failed over by hand (CLUSTER FAILOVER), then another
 * is killed.
 */

let cluster: RedisClusterFixture;
let run = 0;
const pods = new FailoverPods();

beforeAll(async () => {
  cluster = await RedisClusterFixture.start({ replicas: 1, nodeTimeoutMs: 1_000 });
});

afterEach(async () => {
  await pods.closeAll();
});

afterAll(async () => {
  await stopAllRedisServers();
});

function start(count: number, options: Partial<RedisStoreOptions> = {}) {
  run += 1;
  return pods.start(count, {
    cluster: { nodes: cluster.nodes },
    namespace: `cluster-failover${run}`,
    ...options,
  });
}

/** The master serving `key` of `pod`'s namespace. */
function masterOf(pod: FailoverPod, key: string): Promise<RedisServer> {
  return cluster.masterOf(pod.store.keys.for(key).value);
}

/** A key of `pod`'s namespace that `master` serves. */
async function keyServedBy(pod: FailoverPod, master: RedisServer, prefix: string) {
  for (let i = 0; i < 1_000; i++) {
    if ((await masterOf(pod, `${prefix}${i}`)) === master) return `${prefix}${i}`;
  }
  throw new Error(`no key served by the master on port ${master.port}`);
}

describe('Redis Cluster with replicas (3 masters, 1 replica each)', () => {
  it('keeps answering through CLUSTER FAILOVER, then writes to the promoted replica', async () => {
    const all = await start(3);
    await all[0]!.engine.set('price', 100);
    for (const pod of all) await expect(pod.engine.getOrLoad('price', () => 0)).resolves.toBe(100);
    const master = await masterOf(all[0]!, 'price');
    const replica = await cluster.replicaOf(master);

    const { answers } = await readThrough(all, ['price'], cluster.failover(replica));
    expect(fromTheStore(answers)).toEqual([100]);
    expect((await masterOf(all[0]!, 'price')).port).toBe(replica.port);

    await untilEachWrites(all);
    await untilAllUp(all);
    const cold = await keyServedBy(all[0]!, replica, 'cold');
    await expect(herd(all, cold)).resolves.toEqual({
      answers: new Set([`${cold} loaded`]),
      loads: 1,
    });
    await all[2]!.engine.set('price', 200);
    await untilAllServe(all, 'price', 200);
  });

  it('with a master killed: answers meanwhile, says so, and keeps every acknowledged write', async () => {
    // Without the near cache, every read goes to the master, and sees it go.
    const all = await start(3, { waitForReplicas: 1, nearCache: false });
    await all[0]!.engine.set('price', 300);
    for (const pod of all) await expect(pod.engine.getOrLoad('price', () => 0)).resolves.toBe(300);
    const master = await masterOf(all[0]!, 'price');
    const replica = await cluster.replicaOf(master);
    const raw = replica.client();
    // A Cluster replica answers reads only on a connection that asked to read from replicas.
    await raw.call('READONLY');
    const envelope = await raw.call('GET', all[0]!.store.keys.for('price').value);
    raw.disconnect();
    expect(decodeEntry(envelope)).toMatchObject({ value: 300 });

    const { answers, degraded } = await readThrough(all, ['price'], cluster.killMaster(master));
    expect(fromTheStore(answers)).toEqual([300]);
    expect(degraded.size).toBeGreaterThan(0);

    await untilAllUp(all);
    for (const pod of all)
      await expect(pod.engine.read('price', () => 0)).resolves.toMatchObject({ value: 300 });
    const cold = await keyServedBy(all[0]!, replica, 'after');
    await expect(herd(all, cold)).resolves.toEqual({
      answers: new Set([`${cold} loaded`]),
      loads: 1,
    });
  });

  it('checks the eviction policy of every master', async () => {
    const masters = await cluster.masters();
    const lru = masters.at(-1)!;
    await lru.command('CONFIG', 'SET', 'maxmemory', '100mb');
    await lru.command('CONFIG', 'SET', 'maxmemory-policy', 'allkeys-lru');
    try {
      const [pod] = await start(1);
      // A pod connects to a master when it first needs it; each is checked once connected.
      await expect(
        untilWarned(pod!, new RegExp(`allkeys-lru .*on 127\\.0\\.0\\.1:${lru.port}:`)),
      ).resolves.toBeUndefined();
      expect(pod!.store.health().warnings).toHaveLength(1);
    } finally {
      await lru.command('CONFIG', 'SET', 'maxmemory', '0');
      await lru.command('CONFIG', 'SET', 'maxmemory-policy', 'noeviction');
    }
  });
});

async function untilWarned(pod: FailoverPod, warning: RegExp): Promise<void> {
  const giveUpAt = Date.now() + 5_000;
  while (!(pod.store.health().warnings ?? []).some((found) => warning.test(found))) {
    if (Date.now() > giveUpAt)
      throw new Error(`no warning ${warning}: ${JSON.stringify(pod.store.health())}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
