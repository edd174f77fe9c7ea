import { describe, expect, it } from '@jest/globals';
import { BackgroundRefresh, type RefreshRequest } from '../../../lib/core/background-refresh.js';
import { EngineRuntime } from '../../../lib/core/engine-runtime.js';
import { type Entry, newEntry } from '../../../lib/core/entry.js';
import { FillProtocol } from '../../../lib/core/fill-protocol.js';
import { type Loader, MemoryStore, resolvePolicy } from '../../../lib/index.js';
import { ManualClock } from '../../helpers/clock.js';
import { counted } from '../../helpers/counted.js';
import { deferred, flush, until } from '../../helpers/deferred.js';

const POLICY = resolvePolicy({
  soft: '1s',
  hard: '1h',
  jitter: 0,
  backoff: { initial: '1m', max: '1m' },
});

/** Background refresh over a memory store, with `k` stored as `old` and already stale. */
async function staleKey() {
  const clock = new ManualClock();
  const store = new MemoryStore({ now: clock.now });
  const runtime = new EngineRuntime(store, clock.now, () => 0.5);
  const fills = new FillProtocol(runtime, async () => undefined);
  const refresh = new BackgroundRefresh(runtime, fills);
  const now = clock.now();
  const version = await store.set(
    'k',
    newEntry({
      value: 'old',
      policy: POLICY,
      random: () => 0.5,
      loadStartedAt: now,
      now,
      version: 0,
      tags: undefined,
    }),
  );
  clock.advance(2_000);
  const stale = store.get('k').entry as Entry<string>;
  const request = (loader: Loader<string>): RefreshRequest<string> => ({
    key: 'k',
    loader,
    policy: POLICY,
    tags: undefined,
  });
  return { store, runtime, fills, refresh, stale, version, request };
}

describe('BackgroundRefresh', () => {
  it('runs one refresh of a key however many stale callers start one', async () => {
    const { store, refresh, fills, stale, version, request } = await staleKey();
    const gate = deferred<string>();
    const loader = counted(() => gate.promise);
    for (let i = 0; i < 100; i += 1) refresh.start(request(loader), stale, version);
    await until(() => loader.calls === 1);
    for (let i = 0; i < 100; i += 1) refresh.start(request(loader), stale, version);
    gate.resolve('new');
    await until(() => fills.running() === 0);
    expect(loader.calls).toBe(1);
    expect(store.get('k').entry).toMatchObject({ value: 'new' });
  });

  it('counts a refresh as starting until its fill begins, on the next turn (a stale hit is never delayed)', async () => {
    const { refresh, fills, stale, version, request } = await staleKey();
    const loader = counted(() => 'new');
    refresh.start(request(loader), stale, version);
    expect([refresh.starting(), fills.running(), loader.calls]).toEqual([1, 0, 0]);
    await flush();
    expect(refresh.starting()).toBe(0);
    await until(() => fills.running() === 0);
    expect(loader.calls).toBe(1);
  });

  it('starts no refresh while the key backs off after a failed one, until a newer version ends the backoff', async () => {
    const { store, refresh, fills, stale, version, request } = await staleKey();
    const failing = counted(() => Promise.reject(new Error('db down')));
    await expect(refresh.revalidation(request(failing), stale, version)).resolves.toBeUndefined();
    expect(fills.backingOff('k', version)).toBe(true);
    refresh.start(request(failing), stale, version);
    await expect(refresh.revalidation(request(failing), stale, version)).resolves.toBeUndefined();
    // Not even a lease attempt: no refresh was registered.
    expect([refresh.starting(), fills.running()]).toEqual([0, 0]);
    await flush();
    expect(failing.calls).toBe(1);
    await store.invalidate('k', 'stale');
    const { version: newer } = store.get('k');
    const loader = counted(() => 'new');
    await expect(refresh.revalidation(request(loader), stale, newer)).resolves.toMatchObject({
      value: 'new',
    });
    expect(loader.calls).toBe(1);
  });

  it('shares one revalidation per refresh among its callers, resolving with the new value', async () => {
    const { refresh, stale, version, request } = await staleKey();
    const gate = deferred<string>();
    const loader = counted(() => gate.promise);
    const first = refresh.revalidation(request(loader), stale, version);
    const second = refresh.revalidation(request(loader), stale, version);
    expect(second).toBe(first);
    gate.resolve('new');
    await expect(first).resolves.toMatchObject({ value: 'new', path: 'miss' });
    expect(loader.calls).toBe(1);
  });

  it('never rejects a revalidation: a refresh whose loader throws resolves it with undefined', async () => {
    const { refresh, stale, version, request } = await staleKey();
    const throwing = counted((): string => {
      throw new Error('sync');
    });
    await expect(refresh.revalidation(request(throwing), stale, version)).resolves.toBeUndefined();
    expect(throwing.calls).toBe(1);
  });
});
