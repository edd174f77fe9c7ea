import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import type { Entry, HerdStore, StoreSnapshot } from '../../lib/index.js';
import { sleep } from '../helpers/deferred.js';

export interface StoreFixture {
  readonly store: HerdStore;
  /** A second store instance sharing the same backing data (another "process"), when the store is shared. */
  readonly peer?: HerdStore;
  /**
   * Resolves once `store` has heard of every change made so far: a store that answers from copies
   * kept coherent by notifications (the Redis near cache) agrees with its peer only after that.
   */
  settle?(store: HerdStore): Promise<void>;
  close(): Promise<void>;
}

function entry<T>(value: T, overrides: Partial<Entry<T>> = {}): Entry<T> {
  const now = Date.now();
  return {
    value,
    version: 0,
    createdAt: now,
    softExpireAt: now + 60_000,
    hardExpireAt: now + 600_000,
    loadMs: 3,
    ...overrides,
  };
}

/** The behaviour every HerdStore must have; run against each implementation. */
export function describeStoreContract(name: string, create: () => Promise<StoreFixture>): void {
  describe(`${name} store contract`, () => {
    let fixture: StoreFixture;
    let store: HerdStore;
    /** The other process when the store is shared, else the same store. */
    let other: HerdStore;
    const read = async (key: string, from: HerdStore = store): Promise<StoreSnapshot> => {
      await fixture.settle?.(from);
      return await from.get(key);
    };

    beforeEach(async () => {
      fixture = await create();
      store = fixture.store;
      other = fixture.peer ?? store;
    });

    afterEach(async () => {
      await fixture.close();
    });

    describe('clear()', () => {
      it('revokes every lease granted before it, fencing its fill, in one step', async () => {
        const { lease } = await store.acquireLease('held', 30_000);
        await store.set('kept', entry('v'));
        await store.clear!('stale');
        await expect(store.extendLease(lease!, 30_000)).resolves.toBe(false);
        await expect(
          store.fill('held', entry('late', { version: lease!.fence }), lease),
        ).resolves.toBe(false);
        const after = await read('held', other);
        expect(after.entry).toBeUndefined();
        expect(after.version).toBeGreaterThan(lease!.fence);
        const next = await other.acquireLease('held', 30_000);
        expect(next.lease).toBeDefined();
        await expect(
          other.fill('held', entry('after', { version: next.lease!.fence }), next.lease),
        ).resolves.toBe(true);
        await expect(read('held')).resolves.toMatchObject({ entry: { value: 'after' } });
      });

      it("marks every value stale ('stale') or removes it ('delete'), at a newer version", async () => {
        const before = await store.set('a', entry('a'));
        await store.clear!('stale');
        const stale = await read('a', other);
        expect(stale.entry).toMatchObject({ value: 'a', invalidated: true });
        expect(stale.version).toBeGreaterThan(before);
        await store.clear!('delete');
        await expect(read('a', other)).resolves.toMatchObject({ entry: undefined });
        const written = await other.set('a', entry('b'));
        await expect(read('a')).resolves.toMatchObject({
          entry: { value: 'b', version: written },
        });
      });
    });

    it('reads nothing for an absent key', async () => {
      await expect(read('absent')).resolves.toMatchObject({ entry: undefined });
    });

    it('round-trips envelopes of every JSON value, including falsy ones and "not found"', async () => {
      const values: unknown[] = [
        { id: 1, tags: ['a'] },
        [1, 2],
        'text',
        0,
        false,
        '',
        null,
        undefined,
      ];
      for (const [i, value] of values.entries()) {
        const written = entry(value, { tags: ['t'] });
        const version = await store.set(`k${i}`, written);
        const { entry: found } = await read(`k${i}`, other);
        expect(found).toEqual({ ...written, version });
        expect('value' in (found as Entry)).toBe(true);
      }
    });

    it('orders writes by their arrival at the store, never by their timestamps', async () => {
      const first = await store.set(
        'k',
        entry('from a pod whose clock is ahead', { createdAt: Date.now() + 5_000 }),
      );
      const second = await other.set(
        'k',
        entry('from a pod whose clock is behind', { createdAt: Date.now() - 5_000 }),
      );
      expect(second).toBeGreaterThan(first);
      await expect(read('k')).resolves.toMatchObject({
        entry: { value: 'from a pod whose clock is behind', version: second },
        version: second,
      });
    });

    it('advances the version on every lease grant and invalidation, also of an absent key', async () => {
      const versions = [(await read('k')).version];
      const { lease } = await store.acquireLease('k', 5_000);
      versions.push(lease!.fence);
      versions.push((await other.invalidate('k', 'stale')).version);
      versions.push((await store.invalidate('k', 'delete')).version);
      versions.push(await other.set('k', entry('v')));
      versions.push((await read('k', other)).version);
      for (let i = 1; i < versions.length - 1; i += 1)
        expect(versions[i]).toBeGreaterThan(versions[i - 1]!);
      expect(versions.at(-1)).toBe(versions.at(-2));
    });

    it('stores a loaded value while the key is still at its lease fence, and wakes followers', async () => {
      const watch = other.watchFill('k');
      try {
        const { lease } = await store.acquireLease('k', 5_000);
        const woken = watch.next(5_000);
        await expect(
          store.fill('k', entry('filled', { version: lease!.fence }), lease),
        ).resolves.toBe(true);
        await expect(woken).resolves.toBe(true);
        await expect(read('k', other)).resolves.toMatchObject({
          entry: { value: 'filled', version: lease!.fence },
          version: lease!.fence,
        });
        // The fill released the lease.
        await expect(
          other.acquireLease('k', 5_000).then((attempt) => attempt.lease),
        ).resolves.toBeDefined();
      } finally {
        watch.close();
      }
    });

    it.each([
      ['set()', (s: HerdStore) => s.set('k', entry('written'))],
      ['an invalidation', (s: HerdStore) => s.invalidate('k', 'stale')],
      ['a delete', (s: HerdStore) => s.invalidate('k', 'delete')],
    ])('fences a load when %s comes first: its value is not stored', async (_label, change) => {
      await store.set('k', entry('before'));
      const { lease } = await store.acquireLease('k', 5_000);
      await change(other);
      await expect(
        store.fill('k', entry('read before the change', { version: lease!.fence }), lease),
      ).resolves.toBe(false);
      const { entry: found } = await read('k');
      expect((found as Entry | undefined)?.value).not.toBe('read before the change');
    });

    it('revokes the lease on an invalidation: another caller gets one at once, the old holder cannot extend it', async () => {
      const { lease } = await store.acquireLease('k', 60_000);
      await other.invalidate('k', 'stale');
      await expect(store.extendLease(lease!, 60_000)).resolves.toBe(false);
      await expect(
        other.acquireLease('k', 5_000).then((attempt) => attempt.lease),
      ).resolves.toBeDefined();
    });

    it('marks a value stale under a new version without removing it', async () => {
      const written = await store.set('k', entry('v'));
      const { existed, version } = await other.invalidate('k', 'stale');
      expect(existed).toBe(true);
      expect(version).toBeGreaterThan(written);
      await expect(read('k')).resolves.toMatchObject({
        entry: { value: 'v', version, invalidated: true },
        version,
      });
      await expect(store.invalidate('absent', 'stale')).resolves.toMatchObject({ existed: false });
      await expect(read('absent')).resolves.toMatchObject({ entry: undefined });
    });

    it('deletes a value', async () => {
      await store.set('k', entry('v'));
      await expect(other.invalidate('k', 'delete')).resolves.toMatchObject({ existed: true });
      await expect(read('k')).resolves.toMatchObject({ entry: undefined });
      await expect(other.invalidate('k', 'delete')).resolves.toMatchObject({ existed: false });
    });

    it('reads an absent key at least at the version of its last invalidation', async () => {
      const { version } = await store.invalidate('k', 'delete');
      expect((await read('k', other)).version).toBeGreaterThanOrEqual(version);
    });

    it('drops an entry at its hard expiry', async () => {
      const now = Date.now();
      await store.set('short', entry('v', { softExpireAt: now + 10, hardExpireAt: now + 40 }));
      await sleep(80);
      await expect(read('short')).resolves.toMatchObject({ entry: undefined });
    });

    it('keeps index members for their time to live: keys by tag and keys derived from an input', async () => {
      await store.addToIndex({ tag: 'products' }, 'p:1', 60_000);
      await other.addToIndex({ tag: 'products' }, 'p:2', 60_000);
      await store.addToIndex({ tag: 'products' }, 'gone', 20);
      await store.addToIndex({ inputOf: 'p:1' }, 'page:home', 60_000);
      await store.addToIndex({ tag: 'users' }, 'u:1', 60_000);
      // A shorter time to live never cuts a member's deadline.
      await store.addToIndex({ tag: 'products' }, 'p:1', 1);
      await sleep(60);
      await expect(
        other.indexMembers({ tag: 'products' }).then((keys) => keys.sort()),
      ).resolves.toEqual(['p:1', 'p:2']);
      await expect(other.indexMembers({ inputOf: 'p:1' })).resolves.toEqual(['page:home']);
      await expect(store.indexMembers({ inputOf: 'products' })).resolves.toEqual([]);
      await expect(store.indexMembers({ tag: 'nothing' })).resolves.toEqual([]);
    });

    it('keeps a value for the time it had left when it was made, whatever the store clock says', async () => {
      // Made by a pod whose clock is an hour behind: its expiry times look long past here.
      const hourAgo = Date.now() - 3_600_000;
      await store.set(
        'k',
        entry('v', {
          createdAt: hourAgo,
          softExpireAt: hourAgo + 60_000,
          hardExpireAt: hourAgo + 600_000,
        }),
      );
      await expect(read('k', other)).resolves.toMatchObject({ entry: { value: 'v' } });
    });

    it('grants the lease to one caller at a time and reports what the key holds', async () => {
      await store.set('k', entry('v'));
      const first = await store.acquireLease('k', 5_000);
      const second = await other.acquireLease('k', 5_000);
      expect(first.lease).toBeDefined();
      expect(first.lease!.token).not.toHaveLength(0);
      expect(first.current.version).toBe(first.lease!.fence);
      expect(second.lease).toBeUndefined();
      expect(second.current).toMatchObject({ entry: { value: 'v' }, version: first.lease!.fence });
    });

    it('lets one caller take over a lease from the version it saw, and fences the previous holder', async () => {
      const held = await store.acquireLease('k', 60_000);
      const seen = held.current.version;
      const [taken, late] = [
        await other.acquireLease('k', 5_000, { takeoverFrom: seen }),
        await store.acquireLease('k', 5_000, { takeoverFrom: seen }),
      ];
      expect(taken.lease).toBeDefined();
      expect(taken.lease!.fence).toBeGreaterThan(seen);
      expect(late.lease).toBeUndefined();
      await expect(
        store.fill('k', entry('stuck', { version: held.lease!.fence }), held.lease),
      ).resolves.toBe(false);
      await expect(
        other.fill('k', entry('taken over', { version: taken.lease!.fence }), taken.lease),
      ).resolves.toBe(true);
      await expect(read('k')).resolves.toMatchObject({ entry: { value: 'taken over' } });
    });

    it('stores the value of a holder taken over as stuck while its rescuer holds the lease, under the current version', async () => {
      const held = await store.acquireLease('k', 60_000);
      const taken = await other.acquireLease('k', 5_000, {
        takeoverFrom: held.current.version,
        takeover: 'stuck',
      });
      expect(taken.lease).toBeDefined();
      // The slow holder finishes first: its value is stored, the rescuer keeps its lease.
      await expect(
        store.fill('k', entry('slow holder', { version: held.lease!.fence }), held.lease),
      ).resolves.toBe(true);
      await expect(read('k', other)).resolves.toMatchObject({
        entry: { value: 'slow holder', version: taken.lease!.fence },
        version: taken.lease!.fence,
      });
      await expect(other.extendLease(taken.lease!, 5_000)).resolves.toBe(true);
      // The rescuer's value replaces it.
      await expect(
        other.fill('k', entry('rescuer', { version: taken.lease!.fence }), taken.lease),
      ).resolves.toBe(true);
      await expect(read('k')).resolves.toMatchObject({ entry: { value: 'rescuer' } });
    });

    it('fences a holder taken over as stuck once its rescuer let go or the key was invalidated', async () => {
      const released = await store.acquireLease('k', 60_000);
      const rescuer = await other.acquireLease('k', 5_000, {
        takeoverFrom: released.current.version,
        takeover: 'stuck',
      });
      await other.releaseLease(rescuer.lease!);
      await expect(
        store.fill('k', entry('late', { version: released.lease!.fence }), released.lease),
      ).resolves.toBe(false);

      const invalidated = await store.acquireLease('j', 60_000);
      await other.acquireLease('j', 5_000, {
        takeoverFrom: invalidated.current.version,
        takeover: 'stuck',
      });
      await other.invalidate('j', 'delete');
      await expect(
        store.fill('j', entry('late', { version: invalidated.lease!.fence }), invalidated.lease),
      ).resolves.toBe(false);
      await expect(read('j')).resolves.toMatchObject({ entry: undefined });
    });

    it('lets only the owner release or extend the lease', async () => {
      const { lease } = await store.acquireLease('k', 5_000);
      const forged = { ...lease!, token: 'not-the-owner' };
      await store.releaseLease(forged);
      await expect(store.extendLease(forged, 5_000)).resolves.toBe(false);
      await expect(store.acquireLease('k', 5_000)).resolves.toMatchObject({ lease: undefined });
      await expect(store.extendLease(lease!, 5_000)).resolves.toBe(true);
      await store.releaseLease(lease!);
      await expect(
        store.acquireLease('k', 5_000).then((attempt) => attempt.lease),
      ).resolves.toBeDefined();
    });

    it('expires a lease whose owner went away, and the expired owner can no longer extend it', async () => {
      const { lease } = await store.acquireLease('k', 30);
      await sleep(80);
      const next = await other.acquireLease('k', 5_000);
      expect(next.lease).toBeDefined();
      expect(next.lease!.fence).toBeGreaterThan(lease!.fence);
      await expect(store.extendLease(lease!, 5_000)).resolves.toBe(false);
      await store.releaseLease(lease!);
      await expect(store.acquireLease('k', 5_000)).resolves.toMatchObject({ lease: undefined });
    });

    it('wakes followers when the owner releases without a value', async () => {
      const watch = other.watchFill('k');
      try {
        const { lease } = await store.acquireLease('k', 5_000);
        const woken = watch.next(5_000);
        await store.releaseLease(lease!);
        await expect(woken).resolves.toBe(true);
      } finally {
        watch.close();
      }
    });

    it('wakes followers on an invalidation', async () => {
      const watch = other.watchFill('k');
      try {
        const woken = watch.next(5_000);
        await store.invalidate('k', 'stale');
        await expect(woken).resolves.toBe(true);
      } finally {
        watch.close();
      }
    });

    it('keeps a notification that arrives before the follower starts waiting', async () => {
      const watch = other.watchFill('k');
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
