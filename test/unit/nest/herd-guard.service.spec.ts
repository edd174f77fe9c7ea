import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import type { INestApplicationContext } from '@nestjs/common';
import { lastValueFrom, of, toArray } from 'rxjs';
import {
  ConfigurationError,
  HerdGuardModule,
  HerdGuardService,
  LoaderFailedError,
} from '../../../lib/index.js';
import { counted } from '../../helpers/counted.js';
import { deferred, flush, until } from '../../helpers/deferred.js';
import { startContext } from '../../helpers/nest-app.js';

let app: INestApplicationContext;
let herd: HerdGuardService;

beforeEach(async () => {
  app = await startContext(
    HerdGuardModule.forRoot({ policy: { soft: '30s', hard: '5m', jitter: 0 } }),
  );
  herd = app.get(HerdGuardService);
});

afterEach(async () => {
  await app.close();
});

describe('HerdGuardService.clear', () => {
  it('serves every key stale once after clear() (expire), then the reloaded value', async () => {
    let row = 'old';
    const loader = counted(() => row);
    await herd.getOrLoad('a', loader);
    await herd.getOrLoad('b', loader);
    row = 'new';
    await herd.clear();
    await expect(herd.read('a', loader)).resolves.toMatchObject({ value: 'old', path: 'stale' });
    await expect(herd.read('b', loader)).resolves.toMatchObject({ value: 'old', path: 'stale' });
    await until(() => loader.calls === 4);
    await expect(herd.read('a', loader)).resolves.toMatchObject({ value: 'new', path: 'fresh' });
  });

  it("removes every key with clear('delete'): the next read is a miss", async () => {
    const loader = counted(() => 'v');
    await herd.getOrLoad('a', loader);
    await herd.clear('delete');
    await expect(herd.peek('a')).resolves.toBeUndefined();
    await expect(herd.read('a', loader)).resolves.toMatchObject({ value: 'v', path: 'miss' });
    expect(loader.calls).toBe(2);
  });

  it.each([['purge'], [''], [42], [null]])(
    'rejects the mode %p with a ConfigurationError naming clear.mode, and changes nothing',
    async (mode) => {
      await herd.getOrLoad('a', () => 'v');
      const cleared = herd.clear(mode as never);
      await expect(cleared).rejects.toBeInstanceOf(ConfigurationError);
      await expect(cleared).rejects.toMatchObject({
        code: 'HERD_GUARD_CONFIG',
        field: 'clear.mode',
      });
      await expect(herd.read('a', () => 'other')).resolves.toMatchObject({ path: 'fresh' });
    },
  );
});

describe('HerdGuardService reads', () => {
  it('calls the loader once for 500 concurrent callers of one key', async () => {
    const gate = deferred<string>();
    const loader = counted(() => gate.promise);
    const reads = Array.from({ length: 500 }, () => herd.getOrLoad('cold', loader));
    gate.resolve('v');
    await expect(Promise.all(reads)).resolves.toEqual(Array(500).fill('v'));
    expect(loader.calls).toBe(1);
  });

  it.each([
    ['0', 0],
    ['false', false],
    ['an empty string', ''],
    ['an empty array', []],
  ])('caches %s as a value, not a miss', async (_, value) => {
    const loader = counted(() => value);
    await expect(herd.getOrLoad('falsy', loader)).resolves.toEqual(value);
    const second = await herd.read('falsy', loader);
    expect(second).toMatchObject({ value, path: 'fresh', negative: false });
    expect(loader.calls).toBe(1);
  });

  it.each([
    ['null', null],
    ['undefined', undefined],
  ])('caches %s as "not found" for the negative TTL', async (_, value) => {
    const loader = counted(() => value);
    await herd.getOrLoad('missing', loader, { policy: { negativeTtl: '2s' } });
    const second = await herd.read('missing', loader);
    expect(second).toMatchObject({ path: 'fresh', negative: true });
    expect(second.value).toBe(value);
    expect(second.hardExpireAt - second.createdAt).toBe(2_000);
    expect(loader.calls).toBe(1);
  });

  it('lets a per-call policy override the module default, with durations in units', async () => {
    const byDefault = await herd.read('a', () => 1);
    const overridden = await herd.read('b', () => 1, { policy: { soft: '2m' } });
    expect(byDefault.softExpireAt - byDefault.createdAt).toBe(30_000);
    expect(overridden.softExpireAt - overridden.createdAt).toBe(120_000);
    expect(overridden.hardExpireAt - overridden.createdAt).toBe(300_000);
  });

  it('accepts a loader returning an Observable and caches its last value', async () => {
    const loader = counted(() => of('first', 'last'));
    await expect(herd.getOrLoad('obs', loader)).resolves.toBe('last');
    await expect(herd.getOrLoad('obs', loader)).resolves.toBe('last');
    expect(loader.calls).toBe(1);
  });

  it('rejects with LoaderFailedError carrying the cause, and caches nothing', async () => {
    const cause = new Error('db down');
    await expect(herd.getOrLoad('k', () => Promise.reject(cause))).rejects.toMatchObject({
      constructor: LoaderFailedError,
      cause,
    });
    await expect(herd.peek('k')).resolves.toBeUndefined();
  });
});

describe('HerdGuardService.getOrLoad$', () => {
  it('emits once and completes on a miss and on a fresh hit', async () => {
    const loader = counted(() => Promise.resolve('v'));
    await expect(lastValueFrom(herd.getOrLoad$('k', loader).pipe(toArray()))).resolves.toEqual([
      'v',
    ]);
    await expect(lastValueFrom(herd.getOrLoad$('k', loader).pipe(toArray()))).resolves.toEqual([
      'v',
    ]);
    expect(loader.calls).toBe(1);
  });

  it('emits the stale value at once, then the refreshed value when it lands, then completes', async () => {
    await herd.set('k', 'old');
    await herd.expire('k');
    const gate = deferred<string>();
    const loader = counted(() => gate.promise);
    const seen: string[] = [];
    let completed = false;
    herd
      .getOrLoad$('k', loader)
      .subscribe({ next: (value) => seen.push(value), complete: () => (completed = true) });
    await flush();
    expect(seen).toEqual(['old']);
    expect(completed).toBe(false);
    gate.resolve('new');
    await flush();
    expect(seen).toEqual(['old', 'new']);
    expect(completed).toBe(true);
    expect(loader.calls).toBe(1);
  });

  it('completes after the stale value alone when the background refresh fails', async () => {
    await herd.set('k', 'old');
    await herd.expire('k');
    const values = await lastValueFrom(
      herd.getOrLoad$('k', () => Promise.reject(new Error('down'))).pipe(toArray()),
    );
    expect(values).toEqual(['old']);
  });

  it('errors with the read error when nothing is cached and the loader fails', async () => {
    await expect(
      lastValueFrom(herd.getOrLoad$('k', () => Promise.reject(new Error('down')))),
    ).rejects.toBeInstanceOf(LoaderFailedError);
  });
});

describe('HerdGuardService writes and invalidation', () => {
  it('writes through with set: the next read is fresh and does not load', async () => {
    await herd.set('k', { name: 'Ann' });
    const loader = counted(() => ({ name: 'Bob' }));
    await expect(herd.read('k', loader)).resolves.toMatchObject({
      value: { name: 'Ann' },
      path: 'fresh',
    });
    expect(loader.calls).toBe(0);
  });

  it('expire serves the old value once as stale and refreshes it in the background', async () => {
    await herd.set('k', 'old');
    await expect(herd.expire('k')).resolves.toBe(true);
    const loader = counted(() => 'new');
    const stale = await herd.read('k', loader);
    expect(stale).toMatchObject({ value: 'old', path: 'stale' });
    await expect(stale.revalidated).resolves.toMatchObject({ value: 'new' });
    await expect(herd.read('k', loader)).resolves.toMatchObject({ value: 'new', path: 'fresh' });
    expect(loader.calls).toBe(1);
  });

  it('delete makes the next read wait for a load', async () => {
    await herd.set('k', 'old');
    await herd.delete('k');
    await expect(herd.read('k', () => 'new')).resolves.toMatchObject({
      value: 'new',
      path: 'miss',
    });
  });

  it('expireTag marks a group stale without a herd: 100 readers per key, one refresh per key', async () => {
    const keys = ['p1', 'p2', 'p3'];
    await Promise.all(keys.map((key) => herd.set(key, `${key}-old`, { tags: ['products'] })));
    await herd.set('other', 'untouched', { tags: ['users'] });
    await expect(herd.expireTag('products')).resolves.toBe(3);
    const loaders = new Map(keys.map((key) => [key, counted(() => `${key}-new`)]));
    const reads = keys.flatMap((key) =>
      Array.from({ length: 100 }, () => herd.read(key, loaders.get(key)!)),
    );
    const results = await Promise.all(reads);
    expect(results.every((result) => result.path === 'stale')).toBe(true);
    await Promise.all(results.map((result) => result.revalidated));
    expect([...loaders.values()].map((loader) => loader.calls)).toEqual([1, 1, 1]);
    await expect(herd.peek('other')).resolves.toMatchObject({ path: 'fresh' });
  });

  it('deleteTag removes every key of the group', async () => {
    await herd.set('a', 1, { tags: ['t'] });
    await herd.set('b', 2, { tags: ['t'] });
    await expect(herd.deleteTag('t')).resolves.toBe(2);
    await expect(herd.peek('a')).resolves.toBeUndefined();
    await expect(herd.peek('b')).resolves.toBeUndefined();
  });
});

describe('HerdGuardService warming and metrics', () => {
  it('refresh loads a key even while it is fresh', async () => {
    await herd.set('k', 'old');
    await expect(herd.refresh('k', () => 'new')).resolves.toMatchObject({ value: 'new' });
    await expect(herd.peek('k')).resolves.toMatchObject({ value: 'new', path: 'fresh' });
  });

  it('warms many keys with at most `concurrency` loads at once and reports the failures', async () => {
    let running = 0;
    let peak = 0;
    const gates = Array.from({ length: 10 }, () => deferred<void>());
    const entries = gates.map((gate, index) => ({
      key: `w${index}`,
      loader: async () => {
        running += 1;
        peak = Math.max(peak, running);
        await gate.promise;
        running -= 1;
        if (index === 3) throw new Error('no data');
        return index;
      },
    }));
    const report = herd.warm(entries, { concurrency: 3 });
    for (const gate of gates) {
      await flush();
      gate.resolve();
    }
    const { warmed, failed } = await report;
    expect(peak).toBe(3);
    expect(warmed).toBe(9);
    expect(failed.map((failure) => failure.key)).toEqual(['w3']);
    await expect(herd.peek('w9')).resolves.toMatchObject({ value: 9 });
  });

  it('rejects a warm concurrency that is not a positive integer', async () => {
    await expect(herd.warm([], { concurrency: 0 })).rejects.toMatchObject({
      constructor: ConfigurationError,
      field: 'concurrency',
    });
  });

  it('counts fresh, stale and miss reads in its stats snapshot and reports events', async () => {
    const paths: string[] = [];
    const unsubscribe = herd.onEvent((event) => {
      if (event.type === 'read') paths.push(event.path);
    });
    await herd.getOrLoad('k', () => 1);
    await herd.getOrLoad('k', () => 1);
    await herd.expire('k');
    await herd.read('k', () => 2).then((result) => result.revalidated);
    unsubscribe();
    expect(herd.stats().reads).toMatchObject({ fresh: 1, stale: 1, miss: 1 });
    expect(paths).toEqual(['miss', 'fresh', 'stale']);
    expect(herd.health().status).toBe('up');
  });
});
