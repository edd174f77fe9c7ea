import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import type { Entry, HerdStore, StoreRead } from '../../lib/index.js';
import { sleep } from '../helpers/deferred.js';

export interface StoreFixture {
  readonly store: HerdStore;
  /** A second store instance sharing the same backing data (another "process"), when the store is shared. */
  readonly peer?: HerdStore;
  close(): Promise<void>;
}

function entry<T>(value: T, overrides: Partial<Entry<T>> = {}): Entry<T> {
  const now = Date.now();
  return { value, createdAt: now, softExpireAt: now + 60_000, hardExpireAt: now + 600_000, loadMs: 3, ...overrides };
}

/** The behaviour every HerdStore must have; run against each implementation. */
export function describeStoreContract(name: string, create: () => Promise<StoreFixture>): void {
  describe(`${name} store contract`, () => {
    let fixture: StoreFixture;
    let store: HerdStore;
    const read = async (key: string): Promise<StoreRead> => store.get(key);

    beforeEach(async () => {
      fixture = await create();
      store = fixture.store;
    });

    afterEach(async () => {
      await fixture.close();
    });

    it('reads nothing for an absent key', async () => {
      await expect(read('absent')).resolves.toBeUndefined();
    });

    it('round-trips envelopes of every JSON value, including falsy ones and "not found"', async () => {
      const values: unknown[] = [{ id: 1, tags: ['a'] }, [1, 2], 'text', 0, false, '', null, undefined];
      for (const [i, value] of values.entries()) {
        const written = entry(value, { tags: ['t'] });
        await expect(store.set(`k${i}`, written)).resolves.toBe(true);
        const found = (await read(`k${i}`)) as Entry;
        expect(found).toEqual(written);
        expect('value' in found).toBe(true);
      }
    });

    it('refuses to overwrite an envelope with an older one', async () => {
      const newer = entry('newer', { createdAt: Date.now() });
      const older = entry('older', { createdAt: newer.createdAt - 1_000 });
      await store.set('k', newer);
      await expect(store.set('k', older)).resolves.toBe(false);
      await expect(read('k')).resolves.toMatchObject({ value: 'newer' });
    });

    it('deletes a key', async () => {
      await store.set('k', entry('v'));
      await store.delete('k');
      await expect(read('k')).resolves.toBeUndefined();
    });

    it('marks a key stale without removing its value', async () => {
      await store.set('k', entry('v'));
      const now = Date.now();
      await expect(store.markStale('k', now)).resolves.toBe(true);
      const found = (await read('k')) as Entry;
      expect(found.value).toBe('v');
      expect(found.softExpireAt).toBeLessThanOrEqual(now);
      await expect(store.markStale('absent', now)).resolves.toBe(false);
    });

    it('drops an entry at its hard expiry', async () => {
      const now = Date.now();
      await store.set('short', entry('v', { softExpireAt: now + 10, hardExpireAt: now + 40 }));
      await sleep(80);
      await expect(read('short')).resolves.toBeUndefined();
    });

    it('lists the keys written with a tag', async () => {
      await store.set('p:1', entry(1, { tags: ['products'] }));
      await store.set('p:2', entry(2, { tags: ['products', 'featured'] }));
      await store.set('u:1', entry(3, { tags: ['users'] }));
      await expect(store.keysForTag('products').then((keys) => keys.sort())).resolves.toEqual(['p:1', 'p:2']);
      await expect(store.keysForTag('nothing')).resolves.toEqual([]);
    });

    it('grants the lease to one caller at a time and reports what the key holds', async () => {
      await store.set('k', entry('v'));
      const first = await store.acquireLease('k', 5_000);
      const second = await (fixture.peer ?? store).acquireLease('k', 5_000);
      expect(first.lease).toBeDefined();
      expect(first.lease!.token).not.toHaveLength(0);
      expect(second.lease).toBeUndefined();
      expect(second.current).toMatchObject({ value: 'v' });
    });

    it('lets only the owner release or extend the lease', async () => {
      const { lease } = await store.acquireLease('k', 5_000);
      const forged = { ...lease!, token: 'not-the-owner' };
      await store.releaseLease(forged);
      await expect(store.extendLease(forged, 5_000)).resolves.toBe(false);
      await expect(store.acquireLease('k', 5_000)).resolves.toMatchObject({ lease: undefined });
      await expect(store.extendLease(lease!, 5_000)).resolves.toBe(true);
      await store.releaseLease(lease!);
      await expect(store.acquireLease('k', 5_000).then((attempt) => attempt.lease)).resolves.toBeDefined();
    });

    it('expires a lease whose owner went away, and the expired owner can no longer extend it', async () => {
      const { lease } = await store.acquireLease('k', 30);
      await sleep(80);
      const next = await (fixture.peer ?? store).acquireLease('k', 5_000);
      expect(next.lease).toBeDefined();
      expect(next.lease!.fence).toBeGreaterThan(lease!.fence);
      await expect(store.extendLease(lease!, 5_000)).resolves.toBe(false);
      await store.releaseLease(lease!);
      await expect(store.acquireLease('k', 5_000)).resolves.toMatchObject({ lease: undefined });
    });

    it('writes, releases the lease and wakes followers in one set', async () => {
      const watch = (fixture.peer ?? store).watchFill('k');
      try {
        const { lease } = await store.acquireLease('k', 5_000);
        const woken = watch.next(5_000);
        await expect(store.set('k', entry('filled'), { lease })).resolves.toBe(true);
        await expect(woken).resolves.toBe(true);
        await expect(
          (fixture.peer ?? store).acquireLease('k', 5_000).then((attempt) => attempt.lease),
        ).resolves.toBeDefined();
      } finally {
        watch.close();
      }
    });

    it('wakes followers when the owner releases without a value', async () => {
      const watch = (fixture.peer ?? store).watchFill('k');
      try {
        const { lease } = await store.acquireLease('k', 5_000);
        const woken = watch.next(5_000);
        await store.releaseLease(lease!);
        await expect(woken).resolves.toBe(true);
      } finally {
        watch.close();
      }
    });

    it('keeps a notification that arrives before the follower starts waiting', async () => {
      const watch = (fixture.peer ?? store).watchFill('k');
      try {
        await store.set('k', entry('early'));
        // The notification may travel through the network: give it a bounded window.
        await expect(watch.next(2_000)).resolves.toBe(true);
      } finally {
        watch.close();
      }
    });

    it('times a follower out when nothing is filled', async () => {
      const watch = store.watchFill('quiet');
      try {
        await expect(watch.next(20)).resolves.toBe(false);
      } finally {
        watch.close();
      }
    });

    it('reports itself up', () => {
      expect(store.health()).toMatchObject({ status: 'up', breaker: 'closed' });
    });
  });
}
