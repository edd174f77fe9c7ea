import { afterEach, describe, expect, it } from '@jest/globals';
import { HerdEngine } from '../../lib/index.js';
import { RedisStore, type RedisStoreOptions } from '../../lib/redis.js';
import { eventually } from '../helpers/deferred.js';
import { FaultProxy, stopAllFaultProxies } from '../helpers/fault-proxy.js';
import { RedisServer, stopAllRedisServers } from '../helpers/redis-server.js';

/*
 * The node a pod talks to stops being the primary (REPLICAOF, as Sentinel or a managed Redis
 * does): it still answers, but refuses every write with READONLY.
 */

const opened: Array<{ engine: HerdEngine; store: RedisStore }> = [];
let run = 0;

afterEach(async () => {
  for (const pod of opened.splice(0)) {
    await pod.engine.close();
    await pod.store.close();
  }
  await stopAllFaultProxies();
  await stopAllRedisServers();
});

async function pod(options: RedisStoreOptions) {
  const store = new RedisStore({
    namespace: `demoted${run}`,
    commandTimeout: 300,
    breakerThreshold: 3,
    breakerCooldown: '200ms',
    ...options,
  });
  const engine = new HerdEngine({ store, policy: { soft: '1h' } });
  opened.push({ engine, store });
  expect(await store.ready(10_000)).toBe(true);
  return { engine, store };
}

/** Makes `node` a replica of `primary` and waits until it has synced. */
async function demote(node: RedisServer, primary: RedisServer): Promise<void> {
  await node.command('REPLICAOF', primary.host, String(primary.port));
  await eventually(async () => {
    const info = await node.info('replication');
    return info['master_link_status'] === 'up' && info['master_sync_in_progress'] === '0';
  }, 10_000);
}

describe('a primary demoted to a replica', () => {
  it('counts READONLY as a failure: the breaker opens and health names it; reads still answer', async () => {
    run += 1;
    const demoted = await RedisServer.start();
    const primary = await RedisServer.start();
    const { engine, store } = await pod({ url: demoted.url });
    await expect(engine.getOrLoad('kept', () => 'before')).resolves.toBe('before');
    expect(store.health().status).toBe('up');

    await demote(demoted, primary);
    // Refused by the replica; then failing fast (the connection looks for the primary again, the
    // breaker opens).
    await expect(engine.set('write0', 0)).rejects.toThrow(/READONLY/);
    for (let i = 1; i < 3; i++) await expect(engine.set(`write${i}`, i)).rejects.toThrow();
    expect(store.health()).toMatchObject({
      status: 'degraded',
      breaker: 'open',
      reason: expect.stringMatching(/READONLY/),
    });
    // Pods keep answering, without cluster-wide leases: a value this process had, a new load.
    await expect(engine.getOrLoad('kept', () => 'reloaded')).resolves.toBe('before');
    await expect(engine.getOrLoad('new', () => 'loaded here')).resolves.toBe('loaded here');

    // Promoted again: the background probe (a write) finds out, and the store is up.
    await demoted.command('REPLICAOF', 'NO', 'ONE');
    await eventually(async () => store.health().status === 'up', 5_000, 'health back to up');
    await expect(engine.set('after', 1)).resolves.toBeUndefined();
  });

  it('stays degraded while writes are refused, however many reads and heartbeats succeed', async () => {
    run += 1;
    const demoted = await RedisServer.start();
    const primary = await RedisServer.start();
    const { engine, store } = await pod({ url: demoted.url, breakerThreshold: 100 });
    await demote(demoted, primary);
    await expect(engine.set('refused', 1)).rejects.toThrow(/READONLY/);
    // Reads of the replica succeed, and so do heartbeats (PUBLISH works on a replica).
    await expect(engine.peek('anything')).resolves.toBeUndefined();
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    expect(store.health()).toMatchObject({
      status: 'degraded',
      reason: expect.stringMatching(/READONLY/),
    });
  });

  it('behind an address that moves to the new primary (DNS name, VIP), the store follows it', async () => {
    run += 1;
    const old = await RedisServer.start();
    const next = await RedisServer.start({ replicaOf: old });
    const address = await FaultProxy.start(old);
    const { engine, store } = await pod({ url: address.url });
    await engine.set('price', 100);

    // A failover by hand: the replica is promoted, the address moved, the old primary demoted.
    await next.command('REPLICAOF', 'NO', 'ONE');
    address.retarget(next);
    await demote(old, next);

    await eventually(
      () =>
        engine.set('price', 200).then(
          () => true,
          () => false,
        ),
      5_000,
      'a write accepted by the new primary',
    );
    await eventually(async () => store.health().status === 'up', 5_000, 'health back to up');
    const onNewPrimary = await pod({ url: next.url });
    await expect(onNewPrimary.engine.read('price', () => 0)).resolves.toMatchObject({
      value: 200,
      path: 'fresh',
    });
  });
});
