import { getEventListeners } from 'node:events';
import { describe, expect, it } from '@jest/globals';
import {
  CORRUPT_ENTRY,
  type Entry,
  type CachePolicy,
  ClosedError,
  HerdEngine,
  type HerdEvent,
  type LoadContext,
  LoaderFailedError,
  LoaderTimeoutError,
  type LeaseAttempt,
  MemoryStore,
  type StoreSnapshot,
  UpstreamUnavailableError,
  WaitAbortedError,
  WaitTimeoutError,
} from '../../../lib/index.js';
import { asyncReads } from '../../helpers/async-store.js';
import { ManualClock } from '../../helpers/clock.js';
import { activeTimers, deferred, flush, sleep, until } from '../../helpers/deferred.js';
import { memoryEngine } from '../../helpers/engine.js';

function counted<T>(impl: (context: LoadContext<T>) => T | Promise<T>) {
  const loader = (context: LoadContext<T>): T | Promise<T> => {
    loader.calls += 1;
    return impl(context);
  };
  loader.calls = 0;
  return loader;
}

function engineWithClock(policy: CachePolicy) {
  const clock = new ManualClock();
  const store = new MemoryStore({ now: clock.now });
  const engine = new HerdEngine({ store, policy, now: clock.now, random: () => 0.5 });
  return { engine, clock, store };
}

/** `k` loaded as v1, then past its soft TTL, with one refresh started and held on `gate` until the test says. */
async function staleWithRefreshInFlight(policy: CachePolicy) {
  const { engine, clock } = engineWithClock(policy);
  await engine.getOrLoad('k', () => 'v1');
  clock.advance(2_000);
  const gate = deferred<string>();
  const loader = counted(() => gate.promise);
  const stale = await engine.read('k', loader);
  await until(() => loader.calls === 1); // the refresh is reading the backend now
  return { engine, clock, gate, loader, stale };
}

describe('HerdEngine read path', () => {
  it('calls the loader once for 1,000 concurrent callers on a cold key and gives all of them the value', async () => {
    const engine = memoryEngine();
    const gate = deferred<string>();
    const loader = counted(() => gate.promise);
    const reads = Array.from({ length: 1_000 }, () => engine.getOrLoad('cold', loader));
    gate.resolve('value');
    const values = await Promise.all(reads);
    expect(loader.calls).toBe(1);
    expect(values.every((value) => value === 'value')).toBe(true);
    expect(engine.stats().coalesced).toBe(999);
  });

  it('gives all 1,000 callers the typed error when the loader throws, and runs the loader again on the next call', async () => {
    const engine = memoryEngine();
    const gate = deferred<string>();
    const loader = counted(() => gate.promise);
    const reads = Array.from({ length: 1_000 }, () => engine.getOrLoad('k', loader).catch((error: unknown) => error));
    const cause = new Error('db down');
    gate.reject(cause);
    const errors = await Promise.all(reads);
    expect(
      errors.every((error) => error instanceof LoaderFailedError && error.cause === cause && error.key === 'k'),
    ).toBe(true);
    expect(loader.calls).toBe(1);
    await expect(engine.getOrLoad('k', () => 'recovered')).resolves.toBe('recovered');
  });

  it('lets one caller time out and another abort while the rest get the value from a single load', async () => {
    const engine = memoryEngine();
    const gate = deferred<string>();
    const loader = counted(() => gate.promise);
    const controller = new AbortController();
    const patient = Array.from({ length: 10 }, () => engine.getOrLoad('k', loader));
    const timedOut = engine.getOrLoad('k', loader, { timeout: '5ms' });
    const aborted = engine.getOrLoad('k', loader, { signal: controller.signal });
    controller.abort();
    await expect(aborted).rejects.toBeInstanceOf(WaitAbortedError);
    await expect(timedOut).rejects.toBeInstanceOf(WaitTimeoutError);
    gate.resolve('v');
    await expect(Promise.all(patient)).resolves.toEqual(Array(10).fill('v'));
    expect(loader.calls).toBe(1);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });

  it('leaves no inflight entry, timer, watcher or listener after 10,000 random calls', async () => {
    const store = new MemoryStore();
    const engine = new HerdEngine({
      store,
      policy: {
        soft: 2,
        hard: 6,
        jitter: 0,
        negativeTtl: 1,
        leaseTtl: 20,
        waitTimeout: 10,
        loaderHardTimeout: 4,
        backoff: { initial: 1, max: 4 },
      },
    });
    const timersBefore = activeTimers();
    let seed = 7;
    const random = (): number => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed / 2_147_483_648;
    };
    const signals: AbortSignal[] = [];
    const calls: Promise<unknown>[] = [];
    for (let i = 0; i < 10_000; i += 1) {
      const key = `k${Math.floor(random() * 30)}`;
      const roll = random();
      const delay = Math.floor(random() * 8);
      const loader = (): Promise<string | null> | string => {
        if (roll < 0.1) throw new Error('sync');
        if (roll < 0.25) return Promise.reject(new Error('async'));
        if (roll < 0.3) return Promise.resolve(null);
        if (roll < 0.6) return new Promise((resolve) => setTimeout(() => resolve('slow'), delay));
        return 'fast';
      };
      const controller = new AbortController();
      signals.push(controller.signal);
      const choice = random();
      const options =
        choice < 0.2 ? { timeout: Math.floor(random() * 4) } : choice < 0.4 ? { signal: controller.signal } : {};
      calls.push(engine.getOrLoad(key, loader, options).catch(() => undefined));
      if (random() < 0.2) controller.abort();
      if (i % 250 === 0) await sleep(1);
    }
    await Promise.all(calls);
    await until(() => {
      const activity = engine.activity();
      return activity.inflight === 0 && activity.loaders === 0 && activity.pendingStoreOps === 0;
    });
    await until(() => activeTimers() <= timersBefore, 5_000, 'loader timers to finish');
    expect(engine.activity()).toEqual({ inflight: 0, armedWaits: 0, loaders: 0, pendingStoreOps: 0 });
    expect(store.watchers).toBe(0);
    expect(signals.reduce((sum, signal) => sum + getEventListeners(signal, 'abort').length, 0)).toBe(0);
    expect(activeTimers()).toBeLessThanOrEqual(timersBefore);
  });

  it('serves the stale value at once between soft and hard expiry, runs exactly one refresh, then serves the new value', async () => {
    const {
      engine,
      gate,
      loader: refresh,
      stale: first,
    } = await staleWithRefreshInFlight({
      soft: '1s',
      hard: '1m',
      jitter: 0,
    });
    expect(first).toMatchObject({ value: 'v1', path: 'stale' });
    const more = await Promise.all(Array.from({ length: 200 }, () => engine.read('k', refresh)));
    expect(more.every((result) => result.value === 'v1' && result.path === 'stale')).toBe(true);
    expect(refresh.calls).toBe(1);
    gate.resolve('v2');
    await expect(first.revalidated).resolves.toMatchObject({ value: 'v2' });
    await expect(engine.read('k', refresh)).resolves.toMatchObject({ value: 'v2', path: 'fresh' });
    expect(refresh.calls).toBe(1);
  });

  it('never returns a value past its hard expiry', async () => {
    const { engine, clock } = engineWithClock({ soft: '1s', hard: '2s', jitter: 0 });
    await engine.getOrLoad('k', () => 'old');
    clock.advance(2_000);
    const gate = deferred<string>();
    const pending = engine.read('k', () => gate.promise);
    let settled = false;
    void pending.then(() => (settled = true));
    await flush();
    expect(settled).toBe(false);
    gate.resolve('new');
    await expect(pending).resolves.toMatchObject({ value: 'new', path: 'miss' });
    clock.advance(2_000);
    await expect(engine.getOrLoad('k', () => Promise.reject(new Error('down')))).rejects.toBeInstanceOf(
      LoaderFailedError,
    );
  });

  it('serves stale while the loader fails and spaces refresh attempts by the backoff', async () => {
    const { engine, clock } = engineWithClock({
      soft: '100ms',
      hard: '1h',
      jitter: 0,
      backoff: { initial: '100ms', max: '400ms' },
    });
    await engine.getOrLoad('k', () => 'good');
    clock.advance(200);
    const attemptsAt: number[] = [];
    const failing = (): Promise<string> => {
      attemptsAt.push(clock.now());
      return Promise.reject(new Error('backend down'));
    };
    const values: string[] = [];
    for (let step = 0; step < 2_000; step += 1) {
      values.push(await engine.getOrLoad('k', failing));
      await flush();
      clock.advance(1);
    }
    expect(values.every((value) => value === 'good')).toBe(true);
    const gaps = attemptsAt.slice(1).map((at, i) => at - attemptsAt[i]!);
    // random() is 0.5: delays are 75, 150, 300, then capped at 300 ms.
    expect(gaps.slice(0, 3)).toEqual([75, 150, 300]);
    expect(gaps.slice(3).every((gap) => gap === 300)).toBe(true);
    expect(attemptsAt.length).toBeLessThanOrEqual(9);
    expect(engine.stats().staleOnError).toBe(attemptsAt.length);
  });

  it('spreads the expiry of 10,000 entries written together over the jitter range', async () => {
    const clock = new ManualClock();
    const store = new MemoryStore({ maxEntries: 20_000 });
    const engine = new HerdEngine({ store, now: clock.now, policy: { soft: '10s', hard: '100s', jitter: 0.2 } });
    const writtenAt = clock.now();
    await Promise.all(Array.from({ length: 10_000 }, (_, i) => engine.set(`k${i}`, i)));
    const entries = Array.from({ length: 10_000 }, (_, i) => store.get(`k${i}`).entry as Entry);
    const softOffsets = entries.map((entry) => entry.softExpireAt - writtenAt);
    const hardOffsets = entries.map((entry) => entry.hardExpireAt - writtenAt);
    expect(Math.min(...softOffsets)).toBeGreaterThanOrEqual(10_000);
    expect(Math.max(...softOffsets)).toBeLessThanOrEqual(12_000);
    expect(Math.min(...hardOffsets)).toBeGreaterThanOrEqual(100_000);
    expect(Math.max(...hardOffsets)).toBeLessThanOrEqual(120_000);
    const buckets = Array<number>(10).fill(0);
    for (const offset of softOffsets) buckets[Math.min(9, Math.floor((offset - 10_000) / 200))]! += 1;
    // Uniform over the range: every tenth of it holds roughly a tenth of the keys.
    expect(buckets.every((count) => count > 800 && count < 1_200)).toBe(true);
    expect(entries.every((entry) => entry.softExpireAt <= entry.hardExpireAt)).toBe(true);
  });

  it('calls the loader once for 1,000 calls on a missing id within the negative TTL', async () => {
    const { engine, clock } = engineWithClock({ negativeTtl: '5s' });
    const loader = counted(() => null);
    const concurrent = await Promise.all(Array.from({ length: 500 }, () => engine.getOrLoad('missing', loader)));
    for (let i = 0; i < 500; i += 1) await engine.getOrLoad('missing', loader);
    expect(concurrent.every((value) => value === null)).toBe(true);
    expect(loader.calls).toBe(1);
    expect(engine.stats().reads.negative).toBe(500);
    clock.advance(5_000);
    await engine.getOrLoad('missing', loader);
    expect(loader.calls).toBe(2);
  });

  it('caches falsy values as values, not as misses', async () => {
    const engine = memoryEngine();
    for (const [key, value] of [
      ['zero', 0],
      ['false', false],
      ['empty', ''],
      ['list', []],
    ] as const) {
      const loader = counted(() => value);
      await engine.getOrLoad(key, loader);
      await expect(engine.read(key, loader)).resolves.toMatchObject({ value, path: 'fresh', negative: false });
      expect(loader.calls).toBe(1);
    }
  });

  it('treats a corrupt entry as a counted miss and reloads it', async () => {
    class CorruptOnce extends MemoryStore {
      corrupt = true;
      override get(key: string): StoreSnapshot {
        if (this.corrupt) {
          this.corrupt = false;
          return { entry: CORRUPT_ENTRY, version: 0 };
        }
        return super.get(key);
      }
    }
    const engine = new HerdEngine({ store: new CorruptOnce() });
    const events: HerdEvent[] = [];
    engine.onEvent((event) => events.push(event));
    await expect(engine.read('k', () => 'reloaded')).resolves.toMatchObject({ value: 'reloaded', path: 'miss' });
    expect(engine.stats().corruptEntries).toBe(1);
    expect(events.some((event) => event.type === 'corrupt-entry' && event.key === 'k')).toBe(true);
  });

  it('refreshes early (XFetch) only when enabled, before soft expiry', async () => {
    const clock = new ManualClock();
    const store = new MemoryStore();
    const tiny = (): number => 1e-9; // ln(1e-9) is about -20.7: a load of 100 ms looks due 2 s early
    const enabled = new HerdEngine({
      store,
      now: clock.now,
      random: tiny,
      policy: { soft: '10s', jitter: 0, earlyRefresh: true },
    });
    const disabled = new HerdEngine({ store, now: clock.now, random: tiny, policy: { soft: '10s', jitter: 0 } });
    await enabled.getOrLoad('k', async () => {
      clock.advance(100);
      return 'v1';
    });
    clock.advance(8_500);
    const offLoader = counted(() => 'v2');
    await expect(disabled.read('k', offLoader)).resolves.toMatchObject({ path: 'fresh' });
    await flush();
    expect(offLoader.calls).toBe(0);
    const onLoader = counted(() => 'v2');
    const result = await enabled.read('k', onLoader);
    expect(result).toMatchObject({ path: 'fresh', value: 'v1' });
    await until(() => onLoader.calls === 1 && enabled.activity().inflight === 0);
    await expect(enabled.getOrLoad('k', onLoader)).resolves.toBe('v2');
  });

  it('gives callers the stale value after loaderSoftTimeout and lets the load finish in the background', async () => {
    const { engine, clock } = engineWithClock({
      soft: '1s',
      hard: '1h',
      staleWhileRevalidate: false,
      loaderSoftTimeout: '20ms',
    });
    await engine.getOrLoad('k', () => 'old');
    clock.advance(2_000);
    const gate = deferred<string>();
    const loader = counted(() => gate.promise);
    await expect(engine.read('k', loader)).resolves.toMatchObject({ value: 'old', path: 'stale' });
    expect(engine.activity().inflight).toBe(1);
    gate.resolve('new');
    await until(() => engine.activity().inflight === 0);
    await expect(engine.read('k', loader)).resolves.toMatchObject({ value: 'new', path: 'fresh' });
    expect(loader.calls).toBe(1);
  });

  it('aborts the loader and fails the callers after loaderHardTimeout', async () => {
    const engine = memoryEngine({ policy: { loaderHardTimeout: '20ms' } });
    let signal: AbortSignal | undefined;
    const never = (context: LoadContext<string>): Promise<string> => {
      signal = context.signal;
      return new Promise(() => undefined);
    };
    await expect(engine.getOrLoad('k', never)).rejects.toBeInstanceOf(LoaderTimeoutError);
    expect(signal?.aborted).toBe(true);
    expect(engine.activity()).toMatchObject({ inflight: 0, loaders: 0 });
  });

  it('aborts running loaders on close and refuses new reads', async () => {
    const engine = memoryEngine();
    let signal: AbortSignal | undefined;
    const pending = engine.getOrLoad('k', (context) => {
      signal = context.signal;
      return new Promise<string>(() => undefined);
    });
    await flush();
    await engine.close();
    expect(signal?.aborted).toBe(true);
    await expect(pending).rejects.toBeInstanceOf(ClosedError);
    await expect(engine.getOrLoad('k', () => 'v')).rejects.toBeInstanceOf(ClosedError);
  });

  it('expire() makes the next read stale with one background refresh instead of a miss', async () => {
    const engine = memoryEngine({ policy: { soft: '1h' } });
    await engine.getOrLoad('k', () => 'v1');
    await engine.expire('k');
    const gate = deferred<string>();
    const loader = counted(() => gate.promise);
    const reads = await Promise.all(Array.from({ length: 50 }, () => engine.read('k', loader)));
    expect(reads.every((read) => read.path === 'stale' && read.value === 'v1')).toBe(true);
    await until(() => loader.calls > 0);
    await flush();
    expect(loader.calls).toBe(1);
    gate.resolve('v2');
    await reads[0]!.revalidated;
    await expect(engine.getOrLoad('k', loader)).resolves.toBe('v2');
  });

  it('expireTag() marks every tagged key stale, and deleteTag() removes them', async () => {
    const engine = memoryEngine({ policy: { soft: '1h' } });
    await engine.getOrLoad('p:1', () => 'a', { tags: ['products'] });
    await engine.getOrLoad('p:2', () => 'b', { tags: ['products'] });
    await engine.getOrLoad('u:1', () => 'c', { tags: ['users'] });
    await expect(engine.expireTag('products')).resolves.toBe(2);
    await expect(engine.peek('p:1')).resolves.toMatchObject({ path: 'stale' });
    await expect(engine.peek('u:1')).resolves.toMatchObject({ path: 'fresh' });
    await expect(engine.deleteTag('products')).resolves.toBe(2);
    await expect(engine.peek('p:2')).resolves.toBeUndefined();
  });

  it('lets concurrent callers with the same options share one store read, and still counts each of them', async () => {
    const store = asyncReads(new MemoryStore());
    const engine = new HerdEngine({ store });
    const events: HerdEvent[] = [];
    engine.onEvent((event) => events.push(event));
    await engine.getOrLoad('k', () => 'v');
    store.reads = 0;
    const values = await Promise.all(Array.from({ length: 100 }, () => engine.getOrLoad('k', () => 'unused')));
    expect(values).toEqual(Array(100).fill('v'));
    expect(store.reads).toBe(1);
    expect(engine.stats().reads.fresh).toBe(100);
    expect(events.filter((event) => event.type === 'read' && event.path === 'fresh')).toHaveLength(100);
    // Options written inline share by value; other values (or read(), which answers per caller) do not.
    store.reads = 0;
    await Promise.all([
      engine.getOrLoad('k', () => 'x', { tags: ['a'], policy: { soft: '1m' } }),
      engine.getOrLoad('k', () => 'x', { tags: ['a'], policy: { soft: '1m' } }),
      engine.getOrLoad('k', () => 'x', { tags: ['b'], policy: { soft: '1m' } }),
      engine.getOrLoad('k', () => 'x', { tags: ['a'], policy: { soft: '2m' } }),
      engine.read('k', () => 'x'),
    ]);
    expect(store.reads).toBe(4);
  });

  it('resolves a policy written inline once per set of values, not once per call', () => {
    const engine = memoryEngine({ policy: { soft: '10s' } });
    const first = engine.policyFor({ soft: '1m', backoff: { initial: '2s' } });
    expect(engine.policyFor({ soft: '1m', backoff: { initial: '2s' } })).toBe(first);
    expect(engine.policyFor({ backoff: { initial: '2s' }, soft: '1m' })).toEqual(first);
    expect(engine.policyFor({ soft: '1m', backoff: { initial: '3s' } })).not.toBe(first);
    expect(engine.policyFor({ soft: 60_000 })).not.toBe(first);
    // A bad policy is still refused every time.
    expect(() => engine.policyFor({ soft: '1m', sfot: '2m' } as never)).toThrow(/policy\.sfot/);
    expect(() => engine.policyFor({ soft: '1m', sfot: '2m' } as never)).toThrow(/policy\.sfot/);
  });

  it('counts callers sharing a read that turns into a load as coalesced, with one loader call', async () => {
    const engine = new HerdEngine({ store: asyncReads(new MemoryStore()) });
    const loader = counted(() => 'loaded');
    await expect(Promise.all(Array.from({ length: 50 }, () => engine.getOrLoad('cold', loader)))).resolves.toEqual(
      Array(50).fill('loaded'),
    );
    expect(loader.calls).toBe(1);
    expect(engine.stats()).toMatchObject({ coalesced: 49, reads: { miss: 50 } });
  });

  it('does not let a load that started before set() overwrite the value set', async () => {
    const { engine, clock, gate, stale } = await staleWithRefreshInFlight({ soft: '1s', hard: '1h', jitter: 0 });
    clock.advance(10);
    await engine.set('k', 'written after the update');
    gate.resolve('row read before the update');
    await stale.revalidated;
    await expect(engine.read('k', () => 'unused')).resolves.toMatchObject({
      value: 'written after the update',
      path: 'fresh',
    });
  });

  it('does not let a load that started before expire() store its value as fresh', async () => {
    const { engine, clock, gate, stale } = await staleWithRefreshInFlight({ soft: '1s', hard: '1h', jitter: 0 });
    clock.advance(10);
    await engine.expire('k'); // the database changed while the refresh was reading it
    gate.resolve('row read before the update');
    await stale.revalidated;
    const after = await engine.read('k', () => 'row read after the update');
    expect(after.path).toBe('stale');
    await expect(after.revalidated).resolves.toMatchObject({ value: 'row read after the update' });
  });

  it('releases a lease held for backoff when the key is deleted, so the next read loads at once', async () => {
    const { engine, clock } = engineWithClock({ soft: '1s', hard: '1h', jitter: 0, waitTimeout: '50ms' });
    await engine.getOrLoad('k', () => 'v1');
    clock.advance(2_000);
    const failed = await engine.read('k', () => Promise.reject(new Error('db down')));
    await failed.revalidated; // the owner now holds the lease for the backoff delay
    await engine.delete('k');
    await expect(engine.getOrLoad('k', () => 'reloaded')).resolves.toBe('reloaded');
  });

  it('rejects a key that is not a non-empty string', async () => {
    const engine = memoryEngine();
    await expect(engine.getOrLoad('', () => 1)).rejects.toMatchObject({ code: 'HERD_GUARD_INVALID_KEY' });
    await expect(engine.getOrLoad(42 as unknown as string, () => 1)).rejects.toMatchObject({
      code: 'HERD_GUARD_INVALID_KEY',
    });
    await expect(engine.getOrLoad('k', 'nope' as unknown as () => number)).rejects.toMatchObject({
      code: 'HERD_GUARD_CONFIG',
      field: 'loader',
    });
  });
});

describe('HerdEngine across processes sharing one store', () => {
  it('makes a follower wait for the lease owner and wakes it with the fill, without loading', async () => {
    const store = new MemoryStore();
    const owner = new HerdEngine({ store });
    const follower = new HerdEngine({ store });
    const gate = deferred<string>();
    const ownerLoader = counted(() => gate.promise);
    const followerLoader = counted(() => 'should not run');
    const owned = owner.getOrLoad('k', ownerLoader);
    await flush();
    const followed = follower.read('k', followerLoader);
    await until(() => follower.stats().waits.started === 1);
    gate.resolve('filled');
    await expect(owned).resolves.toBe('filled');
    await expect(followed).resolves.toMatchObject({ value: 'filled', path: 'miss' });
    expect(followerLoader.calls).toBe(0);
    // Woken by the fill itself: it never had to take the lease (which a timed-out follower would).
    expect(follower.stats().leases.acquired).toBe(0);
    expect(store.watchers).toBe(0);
  });

  it('gives a follower the stale value at once while another process holds the lease', async () => {
    const store = new MemoryStore();
    const clock = new ManualClock();
    const a = new HerdEngine({ store, now: clock.now, policy: { soft: '1s', hard: '1h', jitter: 0 } });
    const b = new HerdEngine({ store, now: clock.now, policy: { soft: '1s', hard: '1h', jitter: 0 } });
    await a.getOrLoad('k', () => 'old');
    clock.advance(2_000);
    const gate = deferred<string>();
    await expect(a.read('k', () => gate.promise)).resolves.toMatchObject({ value: 'old', path: 'stale' });
    const bLoader = counted(() => 'b');
    const bRead = await b.read('k', bLoader);
    expect(bRead).toMatchObject({ value: 'old', path: 'stale' });
    await expect(bRead.revalidated).resolves.toBeUndefined();
    expect(bLoader.calls).toBe(0);
    expect(b.stats().leases.contended).toBe(1);
    gate.resolve('new');
  });

  it("takes a stuck owner's lease over after waitTimeout: one takeover load, and the stuck load is fenced", async () => {
    const store = new MemoryStore();
    const owner = new HerdEngine({ store, policy: { leaseTtl: '10s' } });
    const gate = deferred<string>();
    const owned = owner.getOrLoad('k', () => gate.promise);
    await flush();
    const followers = [1, 2, 3].map(() => new HerdEngine({ store, policy: { waitTimeout: '30ms' } }));
    const takeover = counted((context: LoadContext<string>) =>
      context.fence === undefined ? 'unleased' : 'taken over',
    );
    const answers = await Promise.all(followers.map((follower) => follower.getOrLoad('k', takeover)));
    expect(answers).toEqual(['taken over', 'taken over', 'taken over']);
    expect(takeover.calls).toBe(1);
    gate.resolve('stuck');
    await expect(owned).resolves.toBe('stuck');
    await expect(followers[0]!.getOrLoad('k', takeover)).resolves.toBe('taken over');
  });

  it('fails a follower with UpstreamUnavailableError after twice waitTimeout of holders that never fill, or loads when onWaitTimeout is load', async () => {
    // Every attempt finds a new holder (so none is ever stuck for waitTimeout), and none fills.
    class Relay extends MemoryStore {
      #version = 1;
      override async acquireLease(): Promise<LeaseAttempt> {
        return { lease: undefined, current: { entry: undefined, version: (this.#version += 1) } };
      }
    }
    const store = new Relay();
    const strict = new HerdEngine({ store, policy: { waitTimeout: '30ms' } });
    const failure = await strict.getOrLoad('k', () => 'x').catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(UpstreamUnavailableError);
    // Whole milliseconds, in the field and the message.
    const { waitedMs, message } = failure as UpstreamUnavailableError;
    expect(Number.isInteger(waitedMs) && waitedMs >= 60).toBe(true);
    expect(message).toContain(`after waiting ${waitedMs} ms`);
    const lenient = new HerdEngine({ store, policy: { waitTimeout: '30ms', onWaitTimeout: 'load' } });
    const lenientLoader = counted((context: LoadContext<string>) =>
      context.fence === undefined ? 'unleased' : 'leased',
    );
    await expect(lenient.getOrLoad('k', lenientLoader)).resolves.toBe('unleased');
    expect(lenientLoader.calls).toBe(1);
  });

  it('stops a waiting follower on close, without loading', async () => {
    const store = new MemoryStore();
    const owner = new HerdEngine({ store });
    const follower = new HerdEngine({ store });
    const gate = deferred<string>();
    const owned = owner.getOrLoad('k', () => gate.promise);
    await flush();
    const followerLoader = counted(() => 'must not run');
    const followed = follower.getOrLoad('k', followerLoader);
    await until(() => follower.stats().waits.started === 1);
    await follower.close();
    await expect(followed).rejects.toBeInstanceOf(ClosedError);
    expect(followerLoader.calls).toBe(0);
    gate.resolve('v');
    await expect(owned).resolves.toBe('v');
  });

  it('keeps the lease alive while a load outlives the lease TTL, so no second loader starts', async () => {
    const store = new MemoryStore();
    const a = new HerdEngine({ store, policy: { leaseTtl: '30ms', waitTimeout: '2s' } });
    const b = new HerdEngine({ store, policy: { leaseTtl: '30ms', waitTimeout: '2s' } });
    const gate = deferred<string>();
    const loader = counted(() => gate.promise);
    const first = a.getOrLoad('k', loader);
    await sleep(100); // over three lease TTLs
    const second = b.getOrLoad('k', loader);
    await until(() => b.stats().waits.started === 1);
    gate.resolve('once');
    await expect(Promise.all([first, second])).resolves.toEqual(['once', 'once']);
    expect(loader.calls).toBe(1);
  });

  it('hands each new lease a larger fencing number', async () => {
    const engine = memoryEngine({ policy: { soft: '1ms', hard: '1ms', jitter: 0 } });
    const fences: number[] = [];
    for (let i = 0; i < 3; i += 1) {
      await engine.getOrLoad('k', (context) => {
        fences.push(context.fence!);
        return i;
      });
      await sleep(2);
    }
    expect(fences[1]).toBeGreaterThan(fences[0]!);
    expect(fences[2]).toBeGreaterThan(fences[1]!);
  });
});
