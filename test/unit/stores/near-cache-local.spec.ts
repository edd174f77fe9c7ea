import { describe, expect, it } from '@jest/globals';
import { type Entry, encodeEntry } from '../../../lib/index.js';
import { NearCache } from '../../../lib/stores/redis/near-cache.js';

/**
 * Local copies: values a process loaded without the store's word (no lease). DESIGN (Near cache):
 * "a copy made without the store's word [...] is the loading pod's own stale fallback, never fresh
 * for anyone once the store answers again"; a copy "carries the version the store gave it;
 * anything the store says later [...] beats it".
 */

function entry(value: string, version: number): Entry {
  const now = Date.now();
  return {
    value,
    version,
    createdAt: now,
    softExpireAt: now + 60_000,
    hardExpireAt: now + 120_000,
    loadMs: 0,
  };
}

function keepLocal(near: NearCache, key: string, kept: Entry): void {
  near.keepLocal(key, kept, encodeEntry(kept));
}

describe('NearCache local copies', () => {
  it('never answers a hit, and answers the fallback as it was loaded', () => {
    const near = new NearCache();
    keepLocal(near, 'k', entry('local', 3));
    expect(near.hit('k')).toBeUndefined();
    expect(near.has('k')).toBe(true);
    expect(near.fallback('k')).toMatchObject({ value: 'local', version: 3 });
    expect(near.fallback('k')?.invalidated).toBeUndefined();
  });

  it('is not kept over a copy of a newer version, nor after a newer version was announced', () => {
    const near = new NearCache();
    const stored = entry('stored', 5);
    near.keep('k', stored, encodeEntry(stored));
    keepLocal(near, 'k', entry('local', 4));
    expect(near.fallback('k')).toMatchObject({ value: 'stored', invalidated: true });

    near.announce('gone', 7);
    keepLocal(near, 'gone', entry('local', 6));
    expect(near.fallback('gone')).toBeUndefined();
  });

  it('is kept over the copy of the version its load started from, and loses to any change announced after', () => {
    const near = new NearCache();
    const stale = { ...entry('stale', 5), invalidated: true };
    near.keep('k', stale, encodeEntry(stale));
    keepLocal(near, 'k', entry('local', 5));
    expect(near.fallback('k')).toMatchObject({ value: 'local' });
    // A late notification of the version it started from changes nothing.
    near.invalidated('k', 'stale', 5);
    expect(near.fallback('k')).toMatchObject({ value: 'local' });

    near.invalidated('k', 'delete', 6);
    expect(near.fallback('k')).toBeUndefined();
    keepLocal(near, 'w', entry('local', 2));
    near.replaced('w', 3);
    expect(near.fallback('w')).toBeUndefined();
  });

  it('does not replace a local copy loaded from a newer version', () => {
    const near = new NearCache();
    keepLocal(near, 'k', entry('newer', 4));
    keepLocal(near, 'k', entry('older', 2));
    expect(near.fallback('k')).toMatchObject({ value: 'newer' });
  });

  it('drops every local copy when the store answers again, leaving the copies it gave', () => {
    const near = new NearCache();
    const stored = entry('stored', 1);
    near.keep('a', stored, encodeEntry(stored));
    keepLocal(near, 'a', entry('local a', 1));
    keepLocal(near, 'b', entry('local b', 0));
    near.dropLocal();
    expect(near.fallback('a')).toMatchObject({ value: 'stored', invalidated: true });
    expect(near.fallback('b')).toBeUndefined();
    expect(near.hit('a')).toMatchObject({ entry: { value: 'stored' } });
  });
});
