import { describe, expect, it } from '@jest/globals';
import { ConfigurationError, type Entry, MemoryStore } from '../../../lib/index.js';

function entry(value: unknown): Entry {
  const now = Date.now();
  return { value, createdAt: now, softExpireAt: now + 60_000, hardExpireAt: now + 600_000, loadMs: 1 };
}

describe('MemoryStore', () => {
  it('keeps at most maxEntries, evicting the least recently used', async () => {
    const store = new MemoryStore({ maxEntries: 3 });
    for (const key of ['a', 'b', 'c']) await store.set(key, entry(key));
    store.get('a');
    await store.set('d', entry('d'));
    expect(store.size).toBe(3);
    expect(store.get('b')).toBeUndefined();
    expect(store.get('a')).toMatchObject({ value: 'a' });
  });

  it('forgets the tags of evicted keys', async () => {
    const store = new MemoryStore({ maxEntries: 1 });
    await store.set('a', { ...entry('a'), tags: ['t'] });
    await store.set('b', entry('b'));
    await expect(store.keysForTag('t')).resolves.toEqual([]);
  });

  it('rejects a maxEntries that is not a positive integer', () => {
    expect(() => new MemoryStore({ maxEntries: 0 })).toThrow(ConfigurationError);
    expect(() => new MemoryStore({ maxEntries: 1.5 })).toThrow(/store\.maxEntries/);
  });
});
