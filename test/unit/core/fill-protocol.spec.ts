import { describe, expect, it } from '@jest/globals';
import { EngineRuntime } from '../../../lib/core/engine-runtime.js';
import { type Entry, markedStale, newEntry } from '../../../lib/core/entry.js';
import type { FillRequest } from '../../../lib/core/fill.js';
import { FillProtocol } from '../../../lib/core/fill-protocol.js';
import { FlightCell } from '../../../lib/core/key-flights.js';
import {
  type CachePolicy,
  ClosedError,
  type HerdEvent,
  type HerdStore,
  type LeaseAttempt,
  type LoadContext,
  LoaderFailedError,
  MemoryStore,
  resolvePolicy,
} from '../../../lib/index.js';
import { ManualClock } from '../../helpers/clock.js';
import { counted } from '../../helpers/counted.js';
import { deferred, until } from '../../helpers/deferred.js';

/** One process's fill protocol over `store`, with what it reports and the keys it removed as gone. */
function pod(store: HerdStore, policy: CachePolicy = {}, clock = new ManualClock()) {
  const runtime = new EngineRuntime(store, clock.now, () => 0.5);
  const events: HerdEvent[] = [];
  runtime.subscribe((event) => events.push(event));
  const gone: string[] = [];
  const fills = new FillProtocol(runtime, async (key) => gone.push(key));
  const resolved = resolvePolicy(policy);
  const fill = <T>(
    key: string,
    loader: FillRequest<T>['loader'],
    request: Partial<FillRequest<T>> = {},
  ) =>
    fills.run({
      key,
      loader,
      policy: resolved,
      stale: undefined,
      tags: undefined,
      mode: 'miss',
      fromVersion: 0,
      cell: new FlightCell(0),
      ...request,
    });
  const fenceOf = (key: string): number | undefined => {
    const acquired = events
      .filter((event) => event.type === 'lease-acquired' && event.key === key)
      .at(-1);
    return acquired?.type === 'lease-acquired' ? acquired.fence : undefined;
  };
  return { runtime, fills, events, gone, fill, fenceOf, policy: resolved, clock };
}

/** A memory store that counts the lease attempts and reads it answers. */
class CountingStore extends MemoryStore {
  acquires = 0;
  reads = 0;

  override acquireLease(...args: Parameters<MemoryStore['acquireLease']>): Promise<LeaseAttempt> {
    this.acquires += 1;
    return super.acquireLease(...args);
  }

  override get(key: string) {
    this.reads += 1;
    return super.get(key);
  }
}

/** `k` stored as `old` at the clock's time, then moved past its soft TTL (stale, still servable). */
async function staleKey(
  store: MemoryStore,
  clock: ManualClock,
  policy = resolvePolicy({ soft: '1s', hard: '1h' }),
) {
  const now = clock.now();
  const version = await store.set(
    'k',
    newEntry({
      value: 'old',
      policy,
      random: () => 0.5,
      loadStartedAt: now,
      now,
      version: 0,
      tags: undefined,
    }),
  );
  clock.advance(2_000);
  return { stale: store.get('k').entry as Entry, version };
}

/** `k` stored as `stored`, fresh for an hour. */
async function freshKey(store: MemoryStore) {
  const policy = resolvePolicy({ soft: '1h' });
  const now = Date.now();
  const version = await store.set(
    'k',
    newEntry({
      value: 'stored',
      policy,
      random: () => 0.5,
      loadStartedAt: now,
      now,
      version: 0,
      tags: undefined,
    }),
  );
  return { stale: store.get('k').entry as Entry, version };
}

describe('FillProtocol', () => {
  it('makes the owner take the lease, load once and store the value at the fence of its lease', async () => {
    const store = new MemoryStore();
    const { fill, fenceOf } = pod(store);
    const loader = counted((context: LoadContext<string>) => `loaded under ${context.fence}`);
    const filled = await fill('k', loader);
    const fence = fenceOf('k');
    expect(fence).toBeDefined();
    expect(loader.calls).toBe(1);
    expect(filled).toMatchObject({
      loaded: true,
      entry: { value: `loaded under ${fence}`, version: fence },
    });
    expect(store.get('k').entry).toMatchObject({ value: `loaded under ${fence}`, version: fence });
    expect(store.leases).toBe(0);
  });

  it("makes a follower wait for the owner's fill notification, then read the store instead of loading", async () => {
    const store = new CountingStore();
    const owner = pod(store);
    const follower = pod(store);
    const gate = deferred<string>();
    const ownerLoader = counted(() => gate.promise);
    const owned = owner.fill('k', ownerLoader);
    await until(() => ownerLoader.calls === 1);
    const followerLoader = counted(() => 'must not run');
    const followed = follower.fill('k', followerLoader);
    await until(() => follower.events.some((event) => event.type === 'wait'));
    expect(store.reads).toBe(0);
    gate.resolve('filled');
    await expect(owned).resolves.toMatchObject({ loaded: true, entry: { value: 'filled' } });
    await expect(followed).resolves.toMatchObject({ loaded: false, entry: { value: 'filled' } });
    expect(followerLoader.calls).toBe(0);
    // Woken by the notification: one read, and no second lease attempt (a follower that timed out makes one).
    expect(store.reads).toBe(1);
    expect(store.acquires).toBe(2);
    expect(store.watchers).toBe(0);
  });

  it.each([
    [
      'throws',
      () => {
        throw new Error('db down');
      },
    ],
    ['rejects', () => Promise.reject(new Error('db down'))],
  ])(
    'ends the lease with the failure when the loader %s: a fill within the backoff shares it, the next loads at once',
    async (_how, failing) => {
      const clock = new ManualClock();
      const store = new MemoryStore({ now: clock.now });
      const policy: CachePolicy = { backoff: { initial: '1s', max: '1s' } };
      const { fill, runtime } = pod(store, policy, clock);
      await expect(fill('k', failing)).rejects.toBeInstanceOf(LoaderFailedError);
      await runtime.settled();
      const other = pod(store, policy, clock);
      const loader = counted(() => 'loaded');
      await expect(other.fill('k', loader)).rejects.toThrow('db down');
      expect(loader.calls).toBe(0);
      // The delay is drawn between half the initial delay and all of it (0.75 s at 0.5).
      clock.advance(1_000);
      await expect(other.fill('k', loader)).resolves.toMatchObject({ loaded: true });
      expect(other.events.map((event) => event.type)).not.toContain('wait');
    },
  );

  it('reports a fill fenced by an invalidation: its callers get the value, the store keeps nothing', async () => {
    const store = new MemoryStore();
    const { fill, events } = pod(store);
    const gate = deferred<string>();
    const loader = counted(() => gate.promise);
    const filling = fill('k', loader);
    await until(() => loader.calls === 1);
    await store.invalidate('k', 'delete');
    gate.resolve('read before the update');
    await expect(filling).resolves.toMatchObject({
      loaded: true,
      entry: { value: 'read before the update' },
    });
    expect(events).toContainEqual({ type: 'load-fenced', key: 'k', background: false });
    expect(store.get('k').entry).toBeUndefined();
  });

  it('serves the stale value when the loader fails, backs the key off and holds the lease for the delay', async () => {
    const store = new MemoryStore();
    const clock = new ManualClock();
    const { fill, fills, runtime, events, fenceOf } = pod(store, { soft: '1s', hard: '1h' }, clock);
    const { stale, version } = await staleKey(store, clock);
    const failing = counted(() => Promise.reject(new Error('db down')));
    const filled = await fill('k', failing, {
      stale,
      mode: 'background',
      fromVersion: version,
      cell: new FlightCell(version),
    });
    expect(filled).toMatchObject({ loaded: false, entry: { value: 'old' } });
    expect(events.map((event) => event.type)).toEqual(
      expect.arrayContaining(['lease-acquired', 'load-failed', 'backoff', 'stale-on-error']),
    );
    expect(fills.backingOff('k', version)).toBe(true);
    // An invalidation (a newer version) ends the backoff.
    expect(fills.backingOff('k', fenceOf('k')! + 1)).toBe(false);
    await runtime.settled();
    expect(store.leases).toBe(1);
  });

  it.each(['background', 'miss'] as const)(
    'does not load (%s) over the fresh value its lease finds, when the request took that very version as stale',
    async (mode) => {
      const store = new MemoryStore();
      const { fill } = pod(store, { soft: '1h' });
      const { stale, version } = await freshKey(store);
      // What a store answers while it cannot be asked: its copy of the key, as stale.
      const fallback = markedStale(stale, stale.version);
      const loader = counted(() => 'loaded over it');
      const filled = await fill('k', loader, {
        stale: fallback,
        mode,
        fromVersion: version,
        cell: new FlightCell(version),
      });
      expect(loader.calls).toBe(0);
      expect(filled).toMatchObject({ loaded: false, entry: { value: 'stored', version } });
      expect(store.get('k').entry).toMatchObject({ value: 'stored', version });
      expect(store.leases).toBe(0);
    },
  );

  it('still loads for warm() when its lease finds the very value its call read', async () => {
    const store = new MemoryStore();
    const { fill } = pod(store, { soft: '1h' });
    const { stale, version } = await freshKey(store);
    const loader = counted(() => 'warmed');
    const filled = await fill('k', loader, {
      stale,
      mode: 'warm',
      fromVersion: version,
      cell: new FlightCell(version),
    });
    expect(loader.calls).toBe(1);
    expect(filled).toMatchObject({ loaded: true, entry: { value: 'warmed' } });
  });

  it('removes a key whose loader answers that it is gone, instead of serving its stale value', async () => {
    const store = new MemoryStore();
    const clock = new ManualClock();
    const { fill, gone, fills } = pod(store, { soft: '1s', hard: '1h' }, clock);
    const { stale, version } = await staleKey(store, clock);
    const notFound = Object.assign(new Error('not found'), { getStatus: () => 404 });
    await expect(fill('k', () => Promise.reject(notFound), { stale })).rejects.toMatchObject({
      cause: notFound,
    });
    expect(gone).toEqual(['k']);
    expect(fills.backingOff('k', version)).toBe(false);
  });

  it('counts its fills and loaders while they run; stop() aborts the loaders and ends the waits', async () => {
    const store = new MemoryStore();
    const owner = pod(store);
    const follower = pod(store);
    let signal: AbortSignal | undefined;
    const owned = owner.fill('k', (context: LoadContext<string>) => {
      signal = context.signal;
      return new Promise<string>(() => undefined);
    });
    await until(() => owner.fills.loading() === 1);
    const followed = follower.fill(
      'k',
      counted(() => 'must not run'),
    );
    await until(() => follower.events.some((event) => event.type === 'wait'));
    expect([owner.fills.running(), owner.fills.loading()]).toEqual([1, 1]);
    expect([follower.fills.running(), follower.fills.loading()]).toEqual([1, 0]);
    for (const each of [owner, follower]) {
      each.runtime.close();
      each.fills.stop();
    }
    await expect(owned).rejects.toBeInstanceOf(ClosedError);
    await expect(followed).rejects.toBeInstanceOf(ClosedError);
    expect(signal?.aborted).toBe(true);
    await Promise.all([owner.fills.settled(), owner.runtime.settled(), follower.fills.settled()]);
    expect([owner.fills.running(), owner.fills.loading(), follower.fills.running()]).toEqual([
      0, 0, 0,
    ]);
    expect(store.leases).toBe(0);
    expect(store.watchers).toBe(0);
  });
});
