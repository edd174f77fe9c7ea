import { type CachePolicy, type Entry, HerdEngine, encodeEntry } from '../../lib/index.js';
import { RedisStore, type RedisStoreOptions } from '../../lib/redis.js';
import { counted } from '../helpers/counted.js';
import { deferred, sleep, until } from '../helpers/deferred.js';
import { FaultProxy, stopAllFaultProxies } from '../helpers/fault-proxy.js';
import { told } from '../helpers/notifications.js';
import { RedisServer, stopAllRedisServers } from '../helpers/redis-server.js';

let server: RedisServer;
let run = 0;
/** Every pod a test started, closed after it. */
let started: Array<{ engine: HerdEngine; store: RedisStore }> = [];

beforeAll(async () => {
  server = await RedisServer.start();
});

afterEach(async () => {
  await Promise.all(started.map((pod) => pod.engine.close()));
  await Promise.all(started.map((pod) => pod.store.close()));
  started = [];
  await stopAllFaultProxies();
});

afterAll(async () => {
  await stopAllRedisServers();
});

/** One pod on its own connections (through `url`, a proxy's or the server's), not waiting for Redis. */
function pod(
  namespace: string,
  url: string,
  policy?: CachePolicy,
  store: Partial<RedisStoreOptions> = {},
) {
  const redis = new RedisStore({ url, namespace, ...store });
  const engine = new HerdEngine({ store: redis, policy });
  const each = { engine, store: redis };
  started.push(each);
  return each;
}

async function pods(count: number, policy?: CachePolicy, store: Partial<RedisStoreOptions> = {}) {
  const namespace = `faults${(run += 1)}`;
  const all = Array.from({ length: count }, () => pod(namespace, server.url, policy, store));
  await Promise.all(all.map((each) => each.store.ready(10_000)));
  return { namespace, pods: all };
}

describe('Redis faults: a stuck lease owner', () => {
  it("answers every pod, the stuck one's own caller included, within waitTimeout plus one load, with one takeover load in the cluster, and fences the stuck load", async () => {
    // Default settings (waitTimeout 5 s, leaseTtl 5 s, loaderHardTimeout 30 s).
    const { namespace, pods: all } = await pods(4);
    const [owner, ...others] = all;
    const stuck = deferred<string>();
    const stuckLoader = counted(() => stuck.promise);
    const first = owner!.engine.getOrLoad('k', stuckLoader);
    await until(() => stuckLoader.calls === 1);
    const takeover = counted(async () => {
      await sleep(50);
      return 'taken over';
    });
    const waiting = others.flatMap((other) =>
      Array.from({ length: 50 }, () =>
        other.engine.getOrLoad('k', takeover).catch((error: unknown) => error),
      ),
    );
    const answers = await Promise.all(waiting);
    expect(answers.every((answer) => answer === 'taken over')).toBe(true);
    expect(takeover.calls).toBe(1);
    // A new burst finds the value.
    const later = await Promise.all(others.map((other) => other.engine.read('k', takeover)));
    expect(later.every((result) => result.value === 'taken over' && result.path === 'fresh')).toBe(
      true,
    );
    // The stuck pod's own caller gets the takeover's value too, while its loader still hangs.
    await expect(first).resolves.toBe('taken over');
    expect(stuckLoader.calls).toBe(1);
    // The stuck load ends late: its value is not stored, every pod keeps the takeover's.
    stuck.resolve('stuck');
    await sleep(50);
    const newcomer = pod(namespace, server.url);
    await newcomer.store.ready(10_000);
    for (const each of [...all, newcomer])
      await expect(each.engine.getOrLoad('k', takeover)).resolves.toBe('taken over');
    expect(takeover.calls).toBe(1);
  }, 30_000);
});

describe('Redis faults: notifications are a hint', () => {
  it('subscribes once Redis is reachable after a cold start with Redis down, and reports degraded until then', async () => {
    const proxy = await FaultProxy.start(server);
    proxy.refuseNew();
    const namespace = `faults${(run += 1)}`;
    const late = pod(namespace, proxy.url, undefined, {
      commandTimeout: '200ms',
      breakerCooldown: '200ms',
    });
    await expect(late.store.ready(300)).resolves.toBe(false);
    expect(late.store.health().status).not.toBe('up');
    proxy.restore();
    await until(() => late.store.health().status === 'up', 10_000, 'the late pod to be up');
    // Its subscription works: a write by another pod wakes a watcher here.
    const other = pod(namespace, server.url);
    await other.store.ready();
    const watch = late.store.watchFill('k');
    try {
      const woken = watch.next(3_000);
      await other.engine.set('k', 'v');
      await expect(woken).resolves.toBe(true);
    } finally {
      watch.close();
    }
  });

  it('gives a follower the value within the re-check interval when the fill notification is lost in a subscriber reconnect', async () => {
    const proxy = await FaultProxy.start(server);
    const namespace = `faults${(run += 1)}`;
    const policy: CachePolicy = { waitTimeout: '3s', leaseTtl: '5s' };
    const owner = pod(namespace, server.url, policy);
    const follower = pod(namespace, proxy.url, policy);
    await Promise.all([owner.store.ready(), follower.store.ready()]);
    const gate = deferred<string>();
    const ownerLoader = counted(() => gate.promise);
    const owned = owner.engine.getOrLoad('k', ownerLoader);
    await until(() => ownerLoader.calls === 1);
    const followed = follower.engine.getOrLoad(
      'k',
      counted(() => 'follower loaded'),
    );
    await until(() => follower.engine.stats().waits.started === 1);
    // The follower's subscriber goes away and cannot come back yet: the fill message is lost to it.
    proxy.refuseNew();
    expect(proxy.dropWhere((connection) => connection.isSubscriber)).toBe(1);
    gate.resolve('filled');
    await owned;
    const startedAt = performance.now();
    await expect(followed).resolves.toBe('filled');
    // Well inside the lease TTL and the wait timeout (the re-check interval is 250 ms).
    expect(performance.now() - startedAt).toBeLessThan(2_000);
    expect(follower.engine.stats().waits.timedOut).toBe(0);
    proxy.restore();
  });
});

describe('Redis faults: no orphan lease, no blocking key', () => {
  it('does not let a lease acquired by a command that timed out on the client block other pods', async () => {
    const proxy = await FaultProxy.start(server);
    const namespace = `faults${(run += 1)}`;
    const policy: CachePolicy = { waitTimeout: '2s' };
    const slow = pod(namespace, proxy.url, policy, {
      commandTimeout: '100ms',
      breakerThreshold: 100,
    });
    const other = pod(namespace, server.url, policy);
    await Promise.all([slow.store.ready(), other.store.ready()]);
    await slow.store.get('warm-up'); // scripts and connection ready
    // Replies to the slow pod are held: its commands run on Redis, but it times out waiting.
    proxy.pause('toClient');
    await expect(slow.engine.getOrLoad('k', async () => 'loaded alone')).resolves.toBe(
      'loaded alone',
    );
    // The lease its acquire took on Redis must not keep the key from the other pods for long.
    await expect(other.engine.getOrLoad('k', async () => 'loaded by the other pod')).resolves.toBe(
      'loaded by the other pod',
    );
    expect(other.engine.stats().waits.timedOut).toBe(0);
    proxy.resume('toClient');
  });

  it('repairs a lease key holding data of the wrong type and reports it', async () => {
    const { pods: all } = await pods(1, { waitTimeout: '500ms' });
    const { engine, store } = all[0]!;
    const raw = server.client();
    try {
      await raw.hset(store.keys.for('k').lease, 'field', 'value');
      await expect(engine.getOrLoad('k', async () => 'loaded')).resolves.toBe('loaded');
      expect(engine.stats().corruptEntries).toBeGreaterThanOrEqual(1);
      await expect(raw.type(store.keys.for('k').lease)).resolves.toBe('none');
    } finally {
      raw.disconnect();
    }
  });
});

describe('Redis faults: the fallback honours invalidations', () => {
  it.each([
    ['delete', (engine: HerdEngine) => engine.delete('k')],
    ['expire', (engine: HerdEngine) => engine.expire('k')],
  ])(
    'never serves as fresh, while Redis is down, a value another pod invalidated with %s',
    async (_label, invalidate) => {
      const proxy = await FaultProxy.start(server);
      const namespace = `faults${(run += 1)}`;
      const policy: CachePolicy = { soft: '1h' };
      const cut = pod(namespace, proxy.url, policy, {
        commandTimeout: '100ms',
        breakerThreshold: 1,
      });
      const other = pod(namespace, server.url, policy);
      await Promise.all([cut.store.ready(), other.store.ready()]);
      await cut.engine.getOrLoad('k', async () => 'before');
      await invalidate(other.engine);
      await told(server, cut.store);
      proxy.blackhole();
      const read = await cut.engine.read('k', async () => 'loaded during the outage');
      expect(read.path === 'fresh' && read.value === 'before').toBe(false);
      proxy.restore();
    },
  );

  it('serves values it saw before Redis went down as stale, never fresh', async () => {
    const proxy = await FaultProxy.start(server);
    const namespace = `faults${(run += 1)}`;
    const cut = pod(
      namespace,
      proxy.url,
      { soft: '1h' },
      { commandTimeout: '100ms', breakerThreshold: 1, nearCache: false },
    );
    await cut.store.ready();
    await cut.engine.getOrLoad('k', async () => 'before');
    proxy.blackhole();
    const gate = deferred<string>();
    const read = await cut.engine.read('k', () => gate.promise);
    expect(read).toMatchObject({ value: 'before', path: 'stale' });
    gate.resolve('refreshed');
    proxy.restore();
  });
});

describe('Redis faults: tag operations at scale', () => {
  it('expires 100,000 tagged keys in bounded batches, with the right count and no breaker trip', async () => {
    const { pods: all } = await pods(1);
    const { engine, store } = all[0]!;
    const raw = server.client();
    const count = 100_000;
    try {
      const now = Date.now();
      const envelope = (i: number): string =>
        encodeEntry({
          value: i,
          version: 1,
          createdAt: now,
          softExpireAt: now + 3_600_000,
          hardExpireAt: now + 7_200_000,
          loadMs: 1,
          tags: ['bulk'],
        } satisfies Entry);
      for (let start = 0; start < count; start += 10_000) {
        const pipeline = raw.pipeline();
        for (let i = start; i < start + 10_000; i += 1) {
          pipeline.set(store.keys.for(`item:${i}`).value, envelope(i), 'PX', 7_200_000);
          pipeline.zadd(store.keys.tag('bulk'), now + 7_200_000, `item:${i}`);
        }
        await pipeline.exec();
      }
      await expect(engine.expireTag('bulk')).resolves.toBe(count);
      expect(store.health()).toEqual({ status: 'up', breaker: 'closed' });
      expect(engine.stats().storeErrors).toBe(0);
      await expect(engine.read(`item:${count - 1}`, async () => -1)).resolves.toMatchObject({
        path: 'stale',
      });
    } finally {
      raw.disconnect();
    }
  }, 120_000);
});

describe('Redis faults: recovery without traffic', () => {
  it('returns to up within a few seconds of Redis coming back, with no request', async () => {
    const proxy = await FaultProxy.start(server);
    const namespace = `faults${(run += 1)}`;
    const cut = pod(namespace, proxy.url, undefined, {
      commandTimeout: '100ms',
      breakerThreshold: 2,
      breakerCooldown: '200ms',
    });
    await cut.store.ready();
    proxy.blackhole();
    for (let i = 0; i < 3; i += 1) await cut.engine.getOrLoad(`k${i}`, async () => 'v');
    expect(cut.store.health().breaker).toBe('open');
    proxy.restore();
    await until(
      () => cut.store.health().status === 'up',
      5_000,
      'the store to recover without traffic',
    );
    expect(cut.store.health()).toEqual({ status: 'up', breaker: 'closed' });
  });
});

describe('Redis faults: counting', () => {
  it('counts a failed command once, however many callers shared it', async () => {
    const proxy = await FaultProxy.start(server);
    const namespace = `faults${(run += 1)}`;
    const cut = pod(namespace, proxy.url, undefined, {
      commandTimeout: '100ms',
      breakerThreshold: 100,
    });
    await cut.store.ready();
    proxy.blackhole();
    const reads = Array.from({ length: 50 }, () =>
      cut.engine.read('k', async () => 'v').catch((error: unknown) => error),
    );
    await Promise.all(reads);
    // One shared read and one lease attempt failed (the 49 others joined the read and the flight).
    expect(cut.engine.stats().storeErrors).toBe(2);
    proxy.restore();
  });
});
