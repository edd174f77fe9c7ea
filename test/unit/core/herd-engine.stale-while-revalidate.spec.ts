import { describe, expect, it } from '@jest/globals';
import { HerdEngine, LoaderFailedError, MemoryStore } from '../../../lib/index.js';
import { ManualClock } from '../../helpers/clock.js';
import { counted } from '../../helpers/counted.js';
import { deferred, flush, until } from '../../helpers/deferred.js';
import { engineWithClock, staleWithRefreshInFlight } from '../../helpers/engine.js';

describe('HerdEngine stale-while-revalidate', () => {
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
    await expect(
      engine.getOrLoad('k', () => Promise.reject(new Error('down'))),
    ).rejects.toBeInstanceOf(LoaderFailedError);
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
    const disabled = new HerdEngine({
      store,
      now: clock.now,
      random: tiny,
      policy: { soft: '10s', jitter: 0 },
    });
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

  it('gives a follower the stale value at once while another process holds the lease', async () => {
    const store = new MemoryStore();
    const clock = new ManualClock();
    const a = new HerdEngine({
      store,
      now: clock.now,
      policy: { soft: '1s', hard: '1h', jitter: 0 },
    });
    const b = new HerdEngine({
      store,
      now: clock.now,
      policy: { soft: '1s', hard: '1h', jitter: 0 },
    });
    await a.getOrLoad('k', () => 'old');
    clock.advance(2_000);
    const gate = deferred<string>();
    await expect(a.read('k', () => gate.promise)).resolves.toMatchObject({
      value: 'old',
      path: 'stale',
    });
    const bLoader = counted(() => 'b');
    const bRead = await b.read('k', bLoader);
    expect(bRead).toMatchObject({ value: 'old', path: 'stale' });
    await expect(bRead.revalidated).resolves.toBeUndefined();
    expect(bLoader.calls).toBe(0);
    expect(b.stats().leases.contended).toBe(1);
    gate.resolve('new');
  });
});
