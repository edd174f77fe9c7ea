import { describe, expect, it } from '@jest/globals';
import {
  HerdEngine,
  type HerdStore,
  type KeyIndex,
  MemoryStore,
  StoreError,
} from '../../../lib/index.js';
import { deferred, until } from '../../helpers/deferred.js';

/**
 * A value must not be stored fresh without the tag index entry through which a tag invalidation
 * reaches it. Here the tag index writes of a memory store fail on demand (as a Redis node that
 * times out would), while the value writes go through.
 */

/** A memory store whose tag index writes fail while `failing.tags` is true. */
function storeWithFailingTagIndex(): { store: HerdStore; failing: { tags: boolean } } {
  const inner = new MemoryStore();
  const failing = { tags: false };
  const store = new Proxy(inner, {
    get(target, property, receiver) {
      if (property === 'addToIndex') {
        return (index: KeyIndex, key: string, ttlMs: number): Promise<void> =>
          failing.tags && 'tag' in index
            ? Promise.reject(new StoreError('index', 'no reply within 200 ms', { key }))
            : target.addToIndex(index, key, ttlMs);
      }
      const value: unknown = Reflect.get(target, property, receiver);
      return typeof value === 'function'
        ? (value as (...args: unknown[]) => unknown).bind(target)
        : value;
    },
  });
  return { store, failing };
}

describe('a tagged value whose tag index could not be written', () => {
  it('retries the index write once its loader returns, so expireTag() reaches the value', async () => {
    const { store, failing } = storeWithFailingTagIndex();
    const engine = new HerdEngine({ store, policy: { soft: '1h' } });
    failing.tags = true;
    const gate = deferred<string>();
    let loading = false;
    const loaded = engine.read(
      'k',
      () => {
        loading = true;
        return gate.promise;
      },
      { tags: ['t'] },
    );
    await until(() => loading);
    failing.tags = false;
    gate.resolve('v');
    await expect(loaded).resolves.toMatchObject({ value: 'v', path: 'miss' });

    await expect(engine.expireTag('t')).resolves.toBe(1);
    await expect(engine.read('k', () => 'reloaded', { tags: ['t'] })).resolves.toMatchObject({
      value: 'v',
      path: 'stale',
    });
  });

  it('stores the value stale when the retry fails too: it is refreshed, and indexed, at its next read', async () => {
    const { store, failing } = storeWithFailingTagIndex();
    const engine = new HerdEngine({ store, policy: { soft: '1h' } });
    failing.tags = true;
    await expect(engine.read('k', () => 'v1', { tags: ['t'] })).resolves.toMatchObject({
      value: 'v1',
      path: 'stale',
    });
    failing.tags = false;
    const next = await engine.read('k', () => 'v2', { tags: ['t'] });
    expect(next).toMatchObject({ value: 'v1', path: 'stale' });
    await next.revalidated;
    await expect(engine.read('k', () => 'unused', { tags: ['t'] })).resolves.toMatchObject({
      value: 'v2',
      path: 'fresh',
    });
    await expect(engine.expireTag('t')).resolves.toBe(1);
  });

  it('rejects set() and leaves the value it wrote stale, not fresh beyond the tag', async () => {
    const { store, failing } = storeWithFailingTagIndex();
    const engine = new HerdEngine({ store, policy: { soft: '1h' } });
    failing.tags = true;
    await expect(engine.set('k', 'written', { tags: ['t'] })).rejects.toBeInstanceOf(StoreError);
    failing.tags = false;
    await expect(engine.read('k', () => 'loaded', { tags: ['t'] })).resolves.toMatchObject({
      value: 'written',
      path: 'stale',
    });
  });
});
