import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { HerdEngine } from '../../lib/index.js';
import { RedisStore, type RedisStoreOptions } from '../../lib/redis.js';
import { HEARTBEAT_INTERVAL_MS } from '../../lib/stores/redis/redis.store.js';
import { eventually, sleep } from '../helpers/deferred.js';
import { FaultProxy, stopAllFaultProxies } from '../helpers/fault-proxy.js';
import { RedisServer, stopAllRedisServers } from '../helpers/redis-server.js';

const COMMAND_TIMEOUT_MS = 100;
/** The stated bound: copies are trusted at most this long after notifications stop arriving. */
const TRUST_BOUND_MS = HEARTBEAT_INTERVAL_MS + COMMAND_TIMEOUT_MS;

let server: RedisServer;
let run = 0;
let opened: Array<{ engine: HerdEngine; store: RedisStore }> = [];

beforeAll(async () => {
  server = await RedisServer.start();
});

afterEach(async () => {
  await Promise.all(opened.map((pod) => pod.engine.close()));
  await Promise.all(opened.map((pod) => pod.store.close()));
  opened = [];
  await stopAllFaultProxies();
});

afterAll(async () => {
  await stopAllRedisServers();
});

async function pods(
  count: number,
  urls: readonly string[] = [],
  store: Partial<RedisStoreOptions> = {},
) {
  const namespace = `near${(run += 1)}`;
  const started = Array.from({ length: count }, (_, i) => {
    const redis = new RedisStore({
      url: urls[i] ?? server.url,
      namespace,
      commandTimeout: COMMAND_TIMEOUT_MS,
      ...store,
    });
    return { store: redis, engine: new HerdEngine({ store: redis, policy: { soft: '1h' } }) };
  });
  opened.push(...started);
  await Promise.all(started.map((pod) => pod.store.ready(10_000)));
  return started;
}

/** A deterministic random source (the seed is printed on failure). */
function seeded(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2_147_483_648;
    return state / 2_147_483_648;
  };
}

describe('near cache', () => {
  it('keeps 3 pods coherent under random set, expire and delete from all of them: each converges within the bound', async () => {
    const all = await pods(3);
    const seed = Date.now() % 100_000;
    const random = seeded(seed);
    const keys = ['a', 'b', 'c'];
    let written = 0;
    for (let round = 0; round < 60; round += 1) {
      const key = keys[Math.floor(random() * keys.length)]!;
      const actor = all[Math.floor(random() * all.length)]!;
      const roll = random();
      // Every pod reads the key first, so each holds a copy to keep coherent. What they read is
      // what the operation supersedes (a refresh those reads started may still load anew after it).
      const before = new Set<unknown>();
      for (const pod of all)
        before.add((await pod.engine.read(key, async () => `loaded-${(written += 1)}`)).value);
      let op: string;
      if (roll < 0.4) {
        op = 'set';
        await actor.engine.set(key, `set-${(written += 1)}`);
      } else if (roll < 0.8) {
        op = 'expire';
        await actor.engine.expire(key);
      } else {
        op = 'delete';
        await actor.engine.delete(key);
      }
      const superseded = (read: { value: unknown; path: string } | undefined): boolean =>
        read !== undefined && read.path === 'fresh' && before.has(read.value);
      const where = { seed, round, op };
      // The pod that invalidates sees it at once; the others within the bound.
      expect({ ...where, superseded: superseded(await actor.engine.peek(key)) }).toEqual({
        ...where,
        superseded: false,
      });
      for (const pod of all) {
        await eventually(
          async () => !superseded(await pod.engine.peek(key)),
          TRUST_BOUND_MS,
          JSON.stringify(where),
        );
      }
    }
  });

  it('never serves as fresh, past the bound, a value deleted while its subscription was down, and drops its copies when it resubscribes', async () => {
    const proxy = await FaultProxy.start(server);
    const [cut, other] = await pods(2, [proxy.url, server.url]);
    await cut!.engine.getOrLoad('k', async () => 'before');
    await other!.engine.getOrLoad('k', async () => 'unused');
    // The cut pod's subscriber goes away and cannot come back; its commands still work.
    proxy.refuseNew();
    proxy.dropWhere((connection) => connection.isSubscriber);
    await other!.engine.delete('k');
    await sleep(TRUST_BOUND_MS + 100);
    await expect(cut!.engine.read('k', async () => 'reloaded')).resolves.toMatchObject({
      value: 'reloaded',
    });
    // Back: copies kept while unsubscribed are dropped, and it follows notifications again.
    proxy.restore();
    await eventually(
      async () => cut!.store.nearCache.trusted,
      5_000,
      'the cut pod to trust its copies again',
    );
    expect(cut!.store.nearCache.entries).toBeLessThanOrEqual(1);
    await other!.engine.set('k', 'after');
    await eventually(
      async () => (await cut!.engine.peek('k'))?.value === 'after',
      TRUST_BOUND_MS,
      'the cut pod to follow',
    );
  });

  it('answers hits from memory at once while Redis is frozen, within the bound, with no errors', async () => {
    const [pod] = await pods(1);
    for (let i = 0; i < 20; i += 1) await pod!.engine.getOrLoad(`k${i}`, async () => `v${i}`);
    server.freeze();
    try {
      const values = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          pod!.engine.getOrLoad(`k${i}`, async () => 'reloaded'),
        ),
      );
      expect(values).toEqual(Array.from({ length: 20 }, (_, i) => `v${i}`));
      expect(pod!.engine.stats().storeErrors).toBe(0);
    } finally {
      server.thaw();
    }
  });

  it('keeps its copies within the byte bound, dropping the least recently used', async () => {
    const maxBytes = 200_000;
    const [pod] = await pods(1, [], { nearCache: { maxBytes } });
    const big = 'x'.repeat(10_000);
    for (let i = 0; i < 100; i += 1)
      await pod!.engine.getOrLoad(`big${i}`, async () => `${big}${i}`);
    const { entries, bytes } = pod!.store.nearCache;
    expect(bytes).toBeLessThanOrEqual(maxBytes);
    expect(entries).toBeGreaterThan(0);
    expect(entries).toBeLessThan(100);
    // Evicted copies are read from Redis again.
    await expect(pod!.engine.read('big0', async () => 'reloaded')).resolves.toMatchObject({
      path: 'fresh',
    });
  });
});
