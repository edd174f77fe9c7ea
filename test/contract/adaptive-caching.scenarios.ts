import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import {
  type CachePolicy,
  ConfigurationError,
  type HerdEngine,
  type LoadContext,
} from '../../lib/index.js';
import { counted } from '../helpers/counted.js';
import { deferred, eventually, sleep, until } from '../helpers/deferred.js';

/** Engines ("pods") over one shared store, and what the store itself keeps for a key. */
export interface AdaptiveCluster {
  readonly engines: readonly HerdEngine[];
  /** How long the store keeps the key's value (ms), as the store itself says. */
  storedTtlMs(key: string): Promise<number | undefined>;
  close(): Promise<void>;
}

export interface AdaptiveSpec {
  readonly count: number;
  readonly policy?: CachePolicy;
}

/** No jitter: the TTLs a test chooses are the ones it reads back. */
const EXACT: CachePolicy = { jitter: 0 };

/**
 * Adaptive caching, run against each store: a loader chooses from what it loaded how its value is
 * cached (TTLs, tags, not at all, a negative entry's TTL, the stale value kept), through its
 * context; the store keeps what it chose, and the invalidation fences still hold.
 */
export function describeAdaptiveCaching(
  name: string,
  start: (spec: AdaptiveSpec) => Promise<AdaptiveCluster>,
): void {
  describe(`${name}: a loader chooses how its value is cached`, () => {
    let cluster: AdaptiveCluster | undefined;
    const launch = async (spec: AdaptiveSpec): Promise<AdaptiveCluster> => {
      cluster = await start({ ...spec, policy: { ...EXACT, ...spec.policy } });
      return cluster;
    };

    beforeEach(() => {
      cluster = undefined;
    });

    afterEach(async () => {
      await cluster?.close();
    });

    it('stores a value with the shorter soft and hard TTL its loader chose, on every pod and in the store', async () => {
      const { engines, storedTtlMs } = await launch({ count: 2, policy: { soft: '1h' } });
      const [a, b] = engines;
      const loaded = await a!.read('k', (context: LoadContext<string>) => {
        context.setPolicy({ soft: '2s', hard: '5s' });
        return 'v1';
      });
      expect(loaded.path).toBe('miss');
      expect(loaded.softExpireAt - loaded.createdAt).toBe(2_000);
      expect(loaded.hardExpireAt - loaded.createdAt).toBe(5_000);
      const seen = await b!.peek<string>('k');
      expect(seen).toMatchObject({ value: 'v1', path: 'fresh' });
      expect(seen!.softExpireAt - seen!.createdAt).toBe(2_000);
      expect(seen!.hardExpireAt - seen!.createdAt).toBe(5_000);
      const ttl = await storedTtlMs('k');
      expect(ttl).toBeGreaterThan(3_000);
      expect(ttl).toBeLessThanOrEqual(5_000);
    });

    it('extends the TTLs by value: a longer soft TTL raises the hard TTL with it unless the loader names one', async () => {
      const { engines, storedTtlMs } = await launch({
        count: 1,
        policy: { soft: '1s', hard: '2s' },
      });
      const [engine] = engines;
      const long = await engine!.read('long', (context: LoadContext<string>) => {
        context.setPolicy({ soft: '1h' });
        return 'archived row';
      });
      expect(long.softExpireAt - long.createdAt).toBe(3_600_000);
      expect(long.hardExpireAt - long.createdAt).toBe(3_600_000);
      const both = await engine!.read('both', (context: LoadContext<string>) => {
        context.setPolicy({ soft: '1h', hard: '2h' });
        return 'archived row';
      });
      expect(both.hardExpireAt - both.createdAt).toBe(7_200_000);
      expect(await storedTtlMs('both')).toBeGreaterThan(7_100_000);
      // A key whose loader chooses nothing keeps the call's policy.
      const plain = await engine!.read('plain', () => 'live row');
      expect(plain.softExpireAt - plain.createdAt).toBe(1_000);
      expect(plain.hardExpireAt - plain.createdAt).toBe(2_000);
    });

    it('indexes the tags a loader adds like the call tags: deleteTag of either removes the entry on every pod', async () => {
      const { engines } = await launch({ count: 2, policy: { soft: '1h' } });
      const [a, b] = engines;
      const loader = counted((context: LoadContext<{ owner: string }>) => {
        const row = { owner: 'user:7' };
        context.setPolicy({ tags: [row.owner] });
        return row;
      });
      await a!.getOrLoad('doc:1', loader, { tags: ['docs'] });
      expect(await b!.deleteTag('user:7')).toBe(1);
      expect(await b!.peek('doc:1')).toBeUndefined();
      // Pod a follows once the notification reached it.
      await eventually(async () => (await a!.peek('doc:1')) === undefined, 5_000, 'pod a');
      await a!.getOrLoad('doc:1', loader, { tags: ['docs'] });
      expect(loader.calls).toBe(2);
      expect(await b!.expireTag('docs')).toBe(1);
      expect(await b!.peek('doc:1')).toMatchObject({ path: 'stale' });
      await eventually(async () => (await a!.peek('doc:1'))?.path === 'stale', 5_000, 'pod a');
    });

    it('fences the refresh of a value whose loader added a tag when that tag is invalidated during the refresh', async () => {
      const { engines } = await launch({ count: 2, policy: { soft: '1h' } });
      const [a, b] = engines;
      const row = { value: 'v1' };
      const tagged = (gate?: Promise<void>) => async (context: LoadContext<string>) => {
        const seen = row.value;
        context.setPolicy({ tags: ['owner:7'] });
        if (gate !== undefined) await gate;
        return seen;
      };
      await a!.getOrLoad('k', tagged());
      await a!.expire('k');
      const gate = deferred();
      const stale = await a!.read('k', tagged(gate.promise));
      expect(stale.path).toBe('stale');
      await until(() => a!.activity().loaders === 1, 5_000, 'the refresh to read the row');
      // The row changes and its owner's tag is invalidated while the refresh holds the old row.
      row.value = 'v2';
      await b!.deleteTag('owner:7');
      gate.resolve();
      await stale.revalidated;
      // The old row is not stored: the next read loads the new one.
      await expect(b!.getOrLoad('k', tagged())).resolves.toBe('v2');
    });

    it('gives every caller of the flight a value its loader chose not to cache, and the next read loads again', async () => {
      const { engines } = await launch({ count: 2, policy: { soft: '1h' } });
      const [a, b] = engines;
      const gate = deferred();
      let runs = 0;
      const loader = counted(async (context: LoadContext<string>): Promise<string> => {
        runs += 1;
        const run = runs;
        await gate.promise;
        context.doNotCache();
        return `partial ${run}`;
      });
      const callers = Array.from({ length: 5 }, () => a!.getOrLoad('k', loader));
      await until(() => loader.calls === 1, 5_000, 'the load to start');
      gate.resolve();
      expect(await Promise.all(callers)).toEqual(Array(5).fill('partial 1'));
      expect(loader.calls).toBe(1);
      expect(await a!.peek('k')).toBeUndefined();
      expect(await b!.peek('k')).toBeUndefined();
      await expect(b!.getOrLoad('k', loader)).resolves.toBe('partial 2');
      await expect(a!.getOrLoad('k', loader)).resolves.toBe('partial 3');
      expect(a!.activity().inflight).toBe(0);
    });

    it('answers a pod waiting for a load that is not cached with that answer, then lets reads load beside each other', async () => {
      const { engines } = await launch({ count: 2, policy: { soft: '1h' } });
      const [a, b] = engines;
      const gates = [deferred(), deferred()];
      let runs = 0;
      const loader = async (context: LoadContext<string>): Promise<string> => {
        runs += 1;
        const run = runs;
        if (run <= 2) await gates[run - 1]!.promise;
        context.doNotCache();
        return `partial ${run}`;
      };
      const first = a!.getOrLoad('k', loader);
      await until(() => runs === 1, 5_000, 'the first load to start');
      const waiting = b!.getOrLoad('k', loader);
      await until(() => b!.stats().waits.started >= 1, 5_000, 'pod b to wait for the lease');
      gates[0]!.resolve();
      // One answer releases every waiter, even one that must not be stored.
      await expect(first).resolves.toBe('partial 1');
      await expect(waiting).resolves.toBe('partial 1');
      expect(runs).toBe(1);
      // For a while after (hit-for-miss), a read does not queue behind another pod's load.
      const slow = a!.getOrLoad('k', loader);
      await until(() => runs === 2, 5_000, 'the second load to start');
      const waitsBefore = b!.stats().waits.started;
      await expect(b!.getOrLoad('k', loader)).resolves.toBe('partial 3');
      expect(b!.stats().waits.started).toBe(waitsBefore);
      gates[1]!.resolve();
      await expect(slow).resolves.toBe('partial 2');
    });

    it('keeps a "not found" for the TTL its loader chose, then loads again', async () => {
      const { engines, storedTtlMs } = await launch({
        count: 1,
        policy: { soft: '1h', negativeTtl: '1h' },
      });
      const [engine] = engines;
      const loader = counted((context: LoadContext<string | null>) => {
        context.setPolicy({ negativeTtl: '300ms' });
        return null;
      });
      const missing = await engine!.read('user:404', loader);
      expect(missing.value).toBeNull();
      expect(missing.softExpireAt - missing.createdAt).toBe(300);
      expect(missing.hardExpireAt - missing.createdAt).toBe(300);
      expect(await storedTtlMs('user:404')).toBeLessThanOrEqual(300);
      await expect(engine!.getOrLoad('user:404', loader)).resolves.toBeNull();
      expect(loader.calls).toBe(1);
      await sleep(350);
      await expect(engine!.getOrLoad('user:404', loader)).resolves.toBeNull();
      expect(loader.calls).toBe(2);
    });

    it('does not store a "not found" whose loader chose a negative TTL of 0', async () => {
      const { engines } = await launch({ count: 1, policy: { negativeTtl: '1h' } });
      const [engine] = engines;
      const loader = counted((context: LoadContext<string | null>) => {
        context.setPolicy({ negativeTtl: 0 });
        return null;
      });
      await expect(engine!.getOrLoad('gone', loader)).resolves.toBeNull();
      expect(await engine!.peek('gone')).toBeUndefined();
    });

    it('renews the stale value when the loader answers "unchanged" (a 304 of a conditional request), with its tags', async () => {
      const { engines } = await launch({ count: 2, policy: { soft: '1h' } });
      const [a, b] = engines;
      await a!.getOrLoad(
        'k',
        (context: LoadContext<string>) => {
          context.setPolicy({ tags: ['row:1'] });
          return 'v1';
        },
        { tags: ['rows'] },
      );
      await a!.expire('k');
      const seenStale: Array<string | undefined> = [];
      const refresh = counted((context: LoadContext<string>) => {
        seenStale.push(context.stale);
        return context.unchanged();
      });
      const stale = await b!.read('k', refresh, { tags: ['rows'] });
      expect(stale).toMatchObject({ value: 'v1', path: 'stale' });
      await stale.revalidated;
      expect(seenStale).toEqual(['v1']);
      const renewed = await b!.read('k', refresh);
      expect(renewed).toMatchObject({ value: 'v1', path: 'fresh' });
      expect(renewed.version).toBeGreaterThan(stale.version);
      // The other pod sees it too, once the fill's notification reached it.
      await eventually(async () => (await a!.peek('k'))?.path === 'fresh', 5_000, 'pod a');
      expect(refresh.calls).toBe(1);
      // The renewed entry is still under its tags, the call's and those its first load added.
      expect(await b!.expireTag('rows')).toBe(1);
      expect(await b!.deleteTag('row:1')).toBe(1);
      expect(await b!.peek('k')).toBeUndefined();
      // Pod a drops its copy once the delete's notification reached it.
      await eventually(async () => (await a!.peek('k')) === undefined, 5_000, 'pod a to drop k');
    });

    it('fences an "unchanged" answer like any fill: a delete during the load wins', async () => {
      const { engines } = await launch({ count: 2, policy: { soft: '1h' } });
      const [a, b] = engines;
      await a!.getOrLoad('k', () => 'v1');
      await a!.expire('k');
      const gate = deferred();
      let started = false;
      const stale = await a!.read('k', async (context: LoadContext<string>) => {
        started = true;
        await gate.promise;
        return context.unchanged();
      });
      expect(stale.path).toBe('stale');
      await until(() => started, 5_000, 'the refresh to start');
      await b!.delete('k');
      gate.resolve();
      await stale.revalidated;
      expect(await b!.peek('k')).toBeUndefined();
      await eventually(async () => (await a!.peek('k')) === undefined, 5_000, 'pod a');
    });

    it.each([
      ['deleteTag', 'delete'],
      ['expireTag', 'expire'],
    ] as const)(
      'fences a first load whose loader adds a tag that %s invalidates while it loads: its value is never served as fresh',
      async (_what, mode) => {
        const { engines } = await launch({ count: 2, policy: { soft: '1h' } });
        const [a, b] = engines;
        const gate = deferred();
        let started = false;
        const first = a!.getOrLoad('k', async (context: LoadContext<string>) => {
          started = true;
          // The row read here predates the invalidation below.
          await gate.promise;
          context.setPolicy({ tags: ['row:1'] });
          return 'v1';
        });
        await until(() => started, 5_000, 'the load to start');
        // Nothing is stored under the tag yet; the invalidation still covers what is loading.
        await (mode === 'delete' ? b!.deleteTag('row:1') : b!.expireTag('row:1'));
        gate.resolve();
        // The load's own caller gets what it loaded, as with any fenced load.
        await expect(first).resolves.toBe('v1');
        for (const engine of [a!, b!]) expect((await engine.peek('k'))?.path).not.toBe('fresh');
        const next = counted(() => 'v2');
        await expect(b!.getOrLoad('k', next)).resolves.toBe('v2');
        await expect(a!.getOrLoad('k', next)).resolves.toBe('v2');
        expect(next.calls).toBe(1);
      },
    );

    it('marks the value a refresh was to replace stale when the tag its loader adds was invalidated during the refresh', async () => {
      const { engines } = await launch({ count: 2, policy: { soft: '1h' } });
      const [a, b] = engines;
      await a!.getOrLoad('k', () => 'v0');
      const gate = deferred();
      let started = false;
      const refreshed = a!.refresh('k', async (context: LoadContext<string>) => {
        started = true;
        await gate.promise;
        context.setPolicy({ tags: ['row:1'] });
        return 'v1';
      });
      await until(() => started, 5_000, 'the refresh to start');
      await b!.deleteTag('row:1');
      gate.resolve();
      await refreshed;
      expect((await a!.peek('k'))?.path).not.toBe('fresh');
      await eventually(async () => (await b!.peek('k'))?.path !== 'fresh', 5_000, 'pod b');
      const next = counted(() => 'v2');
      await expect(b!.getOrLoad('k', next)).resolves.toBe('v0');
      await eventually(async () => (await b!.peek('k'))?.value === 'v2', 5_000, 'the refresh');
      expect(next.calls).toBe(1);
    });

    it('fails the load of a loader that answers "unchanged" with no stale value, storing nothing', async () => {
      const { engines } = await launch({ count: 1 });
      const [engine] = engines;
      const load = engine!.getOrLoad('k', (context: LoadContext<string>) => context.unchanged());
      await expect(load).rejects.toThrow(ConfigurationError);
      await expect(load).rejects.toThrow(/unchanged/);
      expect(await engine!.peek('k')).toBeUndefined();
    });

    it.each([
      ['a negative soft TTL', { soft: -1 }, /setPolicy\.soft/],
      ['a soft TTL of 0', { soft: 0 }, /setPolicy\.soft/],
      ['a hard TTL shorter than the soft one', { soft: '10s', hard: '5s' }, /setPolicy\.hard/],
      ['a hard TTL shorter than the policy soft one', { hard: '1s' }, /setPolicy\.hard/],
      ['a duration without a unit', { soft: '30' }, /setPolicy\.soft/],
      ['an unknown field', { sfot: '30s' }, /setPolicy\.sfot/],
      ['an empty tag', { tags: [''] }, /tag/],
    ])(
      'fails the load whose loader chooses %s with ConfigurationError, storing nothing',
      async (_what, choice, field) => {
        const { engines } = await launch({ count: 1, policy: { soft: '1m' } });
        const [engine] = engines;
        const load = engine!.getOrLoad('k', (context: LoadContext<string>) => {
          context.setPolicy(choice as never);
          return 'v1';
        });
        await expect(load).rejects.toThrow(ConfigurationError);
        await expect(load).rejects.toThrow(field);
        expect(await engine!.peek('k')).toBeUndefined();
      },
    );

    it('fails the load even when the loader catches the error of its bad choice', async () => {
      const { engines } = await launch({ count: 1 });
      const [engine] = engines;
      const load = engine!.getOrLoad('k', (context: LoadContext<string>) => {
        try {
          context.setPolicy({ soft: '10s', hard: '1s' });
        } catch {
          // ignored by mistake
        }
        return 'v1';
      });
      await expect(load).rejects.toThrow(ConfigurationError);
      expect(await engine!.peek('k')).toBeUndefined();
    });

    it('hands the current load context to code the loader calls, and none outside a load', async () => {
      const { engines } = await launch({ count: 1, policy: { soft: '1h' } });
      const [engine] = engines;
      // A repository method called by the loader, which knows the row and not the cache key.
      const findRow = async (): Promise<string> => {
        await Promise.resolve();
        engine!.currentLoad()?.setPolicy({ soft: '3s' });
        return 'row';
      };
      expect(engine!.currentLoad()).toBeUndefined();
      const loaded = await engine!.read('k', (context: LoadContext<string>) => {
        expect(engine!.currentLoad()).toBe(context);
        return findRow();
      });
      expect(loaded.softExpireAt - loaded.createdAt).toBe(3_000);
      expect(engine!.currentLoad()).toBeUndefined();
    });
  });
}
