import { describe, expect, it } from '@jest/globals';
import { ConfigurationError, type Entry, MemoryStore } from '../../../lib/index.js';

function entry(value: unknown): Entry {
  const now = Date.now();
  return {
    value,
    version: 0,
    createdAt: now,
    softExpireAt: now + 60_000,
    hardExpireAt: now + 600_000,
    loadMs: 1,
  };
}

describe('MemoryStore', () => {
  it('keeps at most maxEntries, evicting the least recently used', async () => {
    const store = new MemoryStore({ maxEntries: 3 });
    for (const key of ['a', 'b', 'c']) await store.set(key, entry(key));
    store.get('a');
    await store.set('d', entry('d'));
    expect(store.size).toBe(3);
    expect(store.get('b').entry).toBeUndefined();
    expect(store.get('a').entry).toMatchObject({ value: 'a' });
  });

  it('reads an evicted key at least at the version it was evicted with', async () => {
    const store = new MemoryStore({ maxEntries: 1 });
    await store.set('a', entry('a'));
    const { version } = await store.invalidate('a', 'stale');
    await store.set('b', entry('b'));
    expect(store.get('a')).toMatchObject({ entry: undefined });
    expect(store.get('a').version).toBeGreaterThanOrEqual(version);
  });

  it('keeps its lease map bounded when leases are taken and never released', async () => {
    let now = Date.now();
    const store = new MemoryStore({ now: () => now });
    for (let i = 0; i < 60_000; i += 1) {
      await store.acquireLease(`k${i}`, 1_000);
      now += 10;
    }
    expect(store.leases).toBeLessThan(1_000);
  });

  it('rejects a maxEntries that is not a positive integer', () => {
    expect(() => new MemoryStore({ maxEntries: 0 })).toThrow(ConfigurationError);
    expect(() => new MemoryStore({ maxEntries: 1.5 })).toThrow(/store\.maxEntries/);
  });
});
