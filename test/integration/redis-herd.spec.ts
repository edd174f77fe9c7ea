import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { type Entry, HerdEngine, encodeEntry } from '../../lib/index.js';
import { RedisStore } from '../../lib/redis.js';
import { sleep, until } from '../helpers/deferred.js';
import { type Pod, countedLoader, startPods, stopPods } from '../helpers/pods.js';
import { told } from '../helpers/notifications.js';
import { RedisServer, stopAllRedisServers } from '../helpers/redis-server.js';

const PODS = 8;
const CALLERS = 250;

let server: RedisServer;
let pods: Pod[] = [];
let run = 0;
const namespace = (): string => `herd${(run += 1)}`;

beforeAll(async () => {
  server = await RedisServer.start();
});

afterEach(async () => {
  await stopPods(pods);
  pods = [];
});

afterAll(async () => {
  await stopAllRedisServers();
});

/** Every caller of every pod asks for `key` at once. */
function herd(
  key: string,
  loader: () => Promise<string>,
): Promise<Array<{ value: string; path: string }>> {
  return Promise.all(
    pods.flatMap((pod) => Array.from({ length: CALLERS }, () => pod.engine.read(key, loader))),
  );
}

async function settled(): Promise<void> {
  await until(() =>
    pods.every(
      (pod) => pod.engine.activity().inflight === 0 && pod.engine.activity().pendingStoreOps === 0,
    ),
  );
}

/**
 * Commands clients sent to Redis while `action` ran, by name (lower-cased), seen with MONITOR.
 * Commands run inside our Lua scripts are not counted: they cost no round trip.
 */
async function roundTrips(action: () => Promise<unknown>): Promise<Record<string, number>> {
  const monitor = await server.client().monitor();
  const counts: Record<string, number> = {};
  monitor.on('monitor', (_time: string, args: string[], source: string) => {
    if (source === 'lua') return;
    const name = String(args[0]).toLowerCase();
    counts[name] = (counts[name] ?? 0) + 1;
  });
  try {
    await action();
    await sleep(50); // MONITOR lines arrive after the replies
    return counts;
  } finally {
    monitor.disconnect();
  }
}

describe('Redis store: one load for the whole cluster', () => {
  it('calls the loader once for 8 pods x 250 callers on a cold key', async () => {
    pods = await startPods({ count: PODS, url: server.url, namespace: namespace() });
    const loader = countedLoader(() => 'cold-value', 100);
    const results = await herd('cold', loader);
    expect(loader.calls).toBe(1);
    expect(results).toHaveLength(PODS * CALLERS);
    expect(results.every((result) => result.value === 'cold-value')).toBe(true);
  });

  it('serves every caller the stale value after soft expiry and runs exactly one refresh across 8 pods', async () => {
    pods = await startPods({
      count: PODS,
      url: server.url,
      namespace: namespace(),
      policy: { soft: '300ms', hard: '1h', jitter: 0 },
    });
    const loader = countedLoader((call) => `v${call}`, 100);
    await pods[0]!.engine.getOrLoad('hot', loader);
    await sleep(400);
    const results = await herd('hot', loader);
    expect(results.every((result) => result.value === 'v1' && result.path === 'stale')).toBe(true);
    await settled();
    expect(loader.calls).toBe(2);
    await told(server, pods[5]!.store); // the refresh's notification reached pod 5 (its near cache)
    await expect(pods[5]!.engine.getOrLoad('hot', loader)).resolves.toBe('v2');
  });

  it('after hard expiry loads once and wakes followers by notification, not by polling', async () => {
    pods = await startPods({
      count: PODS,
      url: server.url,
      namespace: namespace(),
      policy: { soft: '100ms', hard: '200ms', jitter: 0 },
    });
    const loader = countedLoader((call) => `v${call}`, 100);
    await pods[0]!.engine.getOrLoad('expiring', loader);
    await sleep(300);
    const stats = await roundTrips(async () => {
      const results = await herd('expiring', loader);
      expect(results.every((result) => result.value === 'v2')).toBe(true);
    });
    expect(loader.calls).toBe(2);
    // Per pod: one read (MGET of envelope and version) shared by its 250 callers before the load;
    // followers get the envelope with the fill notification. A polling loop would issue a read every
    // few milliseconds during the 100 ms load.
    expect(stats['mget'] ?? 0).toBe(PODS);
    // No follower had to take the lease after a timed-out wait: one lease for the first load, one for the herd.
    expect(pods.reduce((sum, pod) => sum + pod.engine.stats().leases.acquired, 0)).toBe(2);
    expect(pods.reduce((sum, pod) => sum + pod.engine.stats().waits.started, 0)).toBe(PODS - 1);
  });

  it.each([
    // [near cache, fresh hit, stale hit (the caller's reads; then acquire + fill in the background)]
    [true, 0, 0],
    [false, 1, 1],
  ])(
    'counts the Redis round trips of a load, a fresh hit and a stale hit (near cache %s)',
    async (nearCache, freshReads, staleReads) => {
      pods = await startPods({
        count: 1,
        url: server.url,
        namespace: namespace(),
        policy: { soft: '200ms', hard: '1h', jitter: 0 },
        store: { nearCache },
      });
      const engine = pods[0]!.engine;
      const load = await roundTrips(() => engine.getOrLoad('rt', async () => 'v1'));
      const fresh = await roundTrips(() => engine.getOrLoad('rt', async () => 'unused'));
      await sleep(300);
      const stale = await roundTrips(async () => {
        const result = await engine.read('rt', async () => 'v2');
        expect(result.path).toBe('stale');
        await result.revalidated;
        await settled();
      });
      // ioredis sends a script with EVAL on its first use on a connection, EVALSHA afterwards. The
      // store's heartbeat (a PUBLISH a second) is not part of any read.
      const scripts = (counts: Record<string, number>) => ({
        get: counts['mget'] ?? 0,
        scripts: (counts['eval'] ?? 0) + (counts['evalsha'] ?? 0),
        total: Object.entries(counts).reduce(
          (sum, [name, count]) => (name === 'publish' ? sum : sum + count),
          0,
        ),
      });
      // load: one read (MGET of envelope and version) + the acquire-lease script + the fill script.
      expect(scripts(load)).toEqual({ get: 1, scripts: 2, total: 3 });
      expect(scripts(fresh)).toEqual({ get: freshReads, scripts: 0, total: freshReads });
      expect(scripts(stale)).toEqual({ get: staleReads, scripts: 2, total: staleReads + 2 });
    },
  );

  it.each([
    [true, 0],
    [false, 1],
  ])(
    'answers 64 concurrent readers of one hot key with at most one read (near cache %s)',
    async (nearCache, reads) => {
      pods = await startPods({
        count: 1,
        url: server.url,
        namespace: namespace(),
        store: { nearCache },
      });
      const engine = pods[0]!.engine;
      await engine.getOrLoad('shared', async () => 'v');
      const stats = await roundTrips(() =>
        Promise.all(
          Array.from({ length: 64 }, () => engine.getOrLoad('shared', async () => 'unused')),
        ),
      );
      expect(stats['mget'] ?? 0).toBe(reads);
    },
  );
});

describe('Redis store: lease and write safety', () => {
  it('does not let an owner whose lease expired release the lease another pod now holds', async () => {
    const ns = namespace();
    pods = await startPods({ count: 2, url: server.url, namespace: ns });
    const [a, b] = pods.map((pod) => pod.store) as [RedisStore, RedisStore];
    const { lease: expired } = await a.acquireLease('k', 50);
    await sleep(100);
    const { lease: current } = await b.acquireLease('k', 10_000);
    expect(current).toBeDefined();
    expect(current!.fence).toBeGreaterThan(expired!.fence);
    await a.releaseLease(expired!);
    await expect(a.extendLease(expired!, 10_000)).resolves.toBe(false);
    await expect(a.acquireLease('k', 10_000)).resolves.toMatchObject({ lease: undefined });
    const raw = server.client();
    try {
      await expect(raw.get(b.keys.for('k').lease)).resolves.toBe(current!.token);
    } finally {
      raw.disconnect();
    }
    // The expired owner's late write is fenced and does not release the new owner's lease.
    const now = Date.now();
    await expect(
      a.fill(
        'k',
        {
          value: 'late',
          version: expired!.fence,
          createdAt: now,
          softExpireAt: now + 1_000,
          hardExpireAt: now + 2_000,
          loadMs: 1,
        },
        expired!,
      ),
    ).resolves.toBe(false);
    await expect(a.acquireLease('k', 10_000)).resolves.toMatchObject({ lease: undefined });
  });

  it('treats corrupt or foreign data at a value key as a counted miss, reloads it and does not crash', async () => {
    pods = await startPods({ count: 1, url: server.url, namespace: namespace() });
    const { engine, store } = pods[0]!;
    const raw = server.client();
    try {
      await raw.set(store.keys.for('garbage').value, '{"not":"an envelope"');
      await raw.hset(store.keys.for('a-hash').value, 'field', 'value');
      await raw.set(
        store.keys.for('old-format').value,
        encodeEntry({
          value: 1,
          version: 1,
          createdAt: 1,
          softExpireAt: 2,
          hardExpireAt: 3,
          loadMs: 0,
        }).replace('"v":2', '"v":1'),
      );
      for (const key of ['garbage', 'a-hash', 'old-format']) {
        await expect(engine.read(key, async () => `reloaded ${key}`)).resolves.toMatchObject({
          value: `reloaded ${key}`,
          path: 'miss',
        });
        await expect(engine.read(key, async () => 'unused')).resolves.toMatchObject({
          value: `reloaded ${key}`,
          path: 'fresh',
        });
      }
      expect(engine.stats().corruptEntries).toBeGreaterThanOrEqual(3);
      expect(store.health().status).toBe('up');
    } finally {
      raw.disconnect();
    }
  });

  it('round-trips keys with spaces, unicode, braces, newlines and 10 kB length between pods', async () => {
    pods = await startPods({ count: 2, url: server.url, namespace: namespace() });
    const keys = [
      'with spaces',
      'ünïcødé 🦄 キー',
      '{braces}and}more{',
      'line\nbreak\r\n',
      'x'.repeat(10_240),
      'tab\tand\u0000nul',
    ];
    for (const key of keys) {
      await pods[0]!.engine.getOrLoad(key, async () => `value of ${key.length}`);
      await expect(pods[1]!.engine.read(key, async () => 'wrong')).resolves.toMatchObject({
        value: `value of ${key.length}`,
        path: 'fresh',
      });
    }
    const distinct = new Set(keys.map((key) => pods[0]!.store.keys.for(key).value));
    expect(distinct.size).toBe(keys.length);
  });

  it.each([
    ['v8', 'a function', { n: 1, run: () => 1 }, '$.run'],
    ['json', 'a BigInt', { n: 10n }, '$.n'],
  ] as const)(
    'fails fast with a typed error naming where a value the %s serializer cannot hold (%s) is, and writes nothing but the failure, held for the backoff',
    async (serializer, _what, value, path) => {
      pods = await startPods({
        count: 1,
        url: server.url,
        namespace: namespace(),
        policy: { serializer },
      });
      await expect(pods[0]!.engine.getOrLoad('bad', async () => value)).rejects.toMatchObject({
        code: 'HERD_GUARD_SERIALIZATION',
        key: 'bad',
        path,
      });
      await expect(Promise.resolve(pods[0]!.store.get('bad'))).resolves.toMatchObject({
        entry: undefined,
      });
      // Every pod would fail alike: the failure answers the cluster until the backoff is over.
      const attempt = await pods[0]!.store.acquireLease('bad', 1_000);
      expect(attempt.lease).toBeUndefined();
      expect(attempt.outcome).toMatchObject({
        kind: 'failed',
        failure: { name: 'SerializationError' },
      });
    },
  );

  it('closes every connection it opened, and none it was given', async () => {
    const probe = server.client();
    const given = server.client();
    try {
      await given.ping();
      const connections = async (): Promise<number> =>
        String(await probe.call('CLIENT', 'LIST'))
          .trim()
          .split('\n').length;
      const before = await connections();
      const owned = new RedisStore({ url: server.url, namespace: namespace() });
      const borrowed = new RedisStore({ client: given, namespace: namespace() });
      await Promise.all([owned.ready(), borrowed.ready()]);
      expect(await connections()).toBe(before + 3);
      await Promise.all([owned.close(), borrowed.close()]);
      await until(() => false, 0).catch(() => undefined);
      expect(await connections()).toBe(before);
      await expect(given.ping()).resolves.toBe('PONG');
    } finally {
      probe.disconnect();
      given.disconnect();
    }
  });
});

describe('Redis store: long loads and restarts', () => {
  it('extends the lease while a load outlives its TTL, so another pod does not load too', async () => {
    pods = await startPods({
      count: 2,
      url: server.url,
      namespace: namespace(),
      policy: { leaseTtl: '100ms', waitTimeout: '5s' },
    });
    const loader = countedLoader(() => 'slow-value', 500);
    const first = pods[0]!.engine.getOrLoad('slow', loader);
    await sleep(300); // three lease TTLs into the load
    const second = pods[1]!.engine.getOrLoad('slow', loader);
    await expect(Promise.all([first, second])).resolves.toEqual(['slow-value', 'slow-value']);
    expect(loader.calls).toBe(1);
    expect(pods[1]!.engine.stats().leases.contended).toBeGreaterThan(0);
  });

  it('keeps working after Redis forgets its scripts (NOSCRIPT is handled)', async () => {
    pods = await startPods({ count: 1, url: server.url, namespace: namespace() });
    const { engine } = pods[0]!;
    await engine.getOrLoad('before', async () => 1);
    const raw = server.client();
    try {
      await raw.script('FLUSH');
    } finally {
      raw.disconnect();
    }
    await expect(engine.getOrLoad('after', async () => 2)).resolves.toBe(2);
    await expect(engine.expire('after')).resolves.toBe(true);
    expect(engine.stats().storeErrors).toBe(0);
  });
});

describe('Redis store: invalidation', () => {
  it('marks a key stale keeping its TTL, and fences a load that started before', async () => {
    pods = await startPods({ count: 1, url: server.url, namespace: namespace() });
    const { store } = pods[0]!;
    const now = Date.now();
    const entry: Entry = {
      value: 'v',
      version: 0,
      createdAt: now - 1_000,
      softExpireAt: now + 60_000,
      hardExpireAt: now + 120_000,
      loadMs: 1,
    };
    await store.set('k', entry);
    const { lease } = await store.acquireLease('k', 10_000);
    const raw = server.client();
    try {
      const ttlBefore = await raw.pttl(store.keys.for('k').value);
      const { existed, version } = await store.invalidate('k', 'stale');
      expect(existed).toBe(true);
      const ttlAfter = await raw.pttl(store.keys.for('k').value);
      expect(ttlAfter).toBeGreaterThan(ttlBefore - 1_000);
      await expect(Promise.resolve(store.get('k'))).resolves.toMatchObject({
        entry: { value: 'v', version, invalidated: true, softExpireAt: now + 60_000 },
        version,
      });
      // The load that held the lease before the invalidation is fenced.
      const early: Entry = { ...entry, value: 'read before', version: lease!.fence };
      await expect(store.fill('k', early, lease!)).resolves.toBe(false);
    } finally {
      raw.disconnect();
    }
  });

  it('deletes the value and any lease held on the key, and wakes followers elsewhere', async () => {
    pods = await startPods({ count: 2, url: server.url, namespace: namespace() });
    const [a, b] = pods.map((pod) => pod.store) as [RedisStore, RedisStore];
    const now = Date.now();
    await a.set('k', {
      value: 'v',
      version: 0,
      createdAt: now,
      softExpireAt: now + 60_000,
      hardExpireAt: now + 120_000,
      loadMs: 1,
    });
    const { lease } = await a.acquireLease('k', 60_000);
    expect(lease).toBeDefined();
    const watch = b.watchFill('k');
    try {
      const woken = watch.next(5_000);
      await b.invalidate('k', 'delete');
      await expect(woken).resolves.toBe(true);
      await expect(Promise.resolve(b.get('k'))).resolves.toMatchObject({ entry: undefined });
      await expect(
        b.acquireLease('k', 1_000).then((attempt) => attempt.lease),
      ).resolves.toBeDefined();
    } finally {
      watch.close();
    }
  });
});

describe('engine on Redis: wait timeout', () => {
  it('lets a follower take the lease over from an owner that holds it past waitTimeout, and fences the late value', async () => {
    pods = await startPods({
      count: 2,
      url: server.url,
      namespace: namespace(),
      policy: { waitTimeout: '150ms', leaseTtl: '10s' },
    });
    let release!: () => void;
    const owner = pods[0]!.engine.getOrLoad(
      'slow',
      () => new Promise<string>((resolve) => (release = () => resolve('late'))),
    );
    await until(() => pods[0]!.engine.activity().loaders === 1);
    await expect(pods[1]!.engine.getOrLoad('slow', async () => 'taken over')).resolves.toBe(
      'taken over',
    );
    release();
    await expect(owner).resolves.toBe('late');
    expect(pods[0]!.engine.stats().loads.fenced).toBe(1);
    await expect(pods[0]!.engine.getOrLoad('slow', async () => 'unused')).resolves.toBe(
      'taken over',
    );
  });

  it('works with a client the user passes in', async () => {
    const client = server.client();
    try {
      const store = new RedisStore({ client, namespace: namespace() });
      await store.ready();
      const engine = new HerdEngine({ store });
      await expect(engine.getOrLoad('k', async () => 'v')).resolves.toBe('v');
      await engine.close();
      await store.close();
      await expect(client.ping()).resolves.toBe('PONG');
    } finally {
      client.disconnect();
    }
  });
});
