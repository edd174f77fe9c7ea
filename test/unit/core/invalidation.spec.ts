import { describe, expect, it } from '@jest/globals';
import { type Entry, newEntry } from '../../../lib/core/entry.js';
import { Invalidation } from '../../../lib/core/invalidation.js';
import {
  ConfigurationError,
  type InvalidationMode,
  type InvalidationResult,
  MemoryStore,
  resolvePolicy,
} from '../../../lib/index.js';

const POLICY = resolvePolicy({ soft: '1h' });

function entry(value: string, tags?: readonly string[]): Entry<string> {
  const now = Date.now();
  return newEntry({
    value,
    policy: POLICY,
    random: () => 0.5,
    loadStartedAt: now,
    now,
    version: 0,
    tags,
  });
}

/** A memory store that records the keys it invalidates, in order. */
class RecordingStore extends MemoryStore {
  readonly invalidated: string[] = [];

  override invalidate(key: string, mode: InvalidationMode): Promise<InvalidationResult> {
    this.invalidated.push(key);
    return super.invalidate(key, mode);
  }
}

/** Records each `derived` key as derived from its `input` (its loader read the input). */
async function derive(
  store: MemoryStore,
  links: ReadonlyArray<readonly [input: string, derived: string]>,
) {
  for (const [input, derived] of links) await store.addToIndex({ inputOf: input }, derived, 60_000);
}

describe('Invalidation', () => {
  it('cascades to the keys derived from an expired key breadth first, each once, cycles included', async () => {
    const store = new RecordingStore();
    // a → b, c; b → d; c → d; d → a (a cycle back to the root).
    await derive(store, [
      ['a', 'b'],
      ['a', 'c'],
      ['b', 'd'],
      ['c', 'd'],
      ['d', 'a'],
    ]);
    for (const key of ['a', 'b', 'c', 'd']) await store.set(key, entry(key));
    await expect(new Invalidation(store).expire('a')).resolves.toBe(true);
    expect(store.invalidated[0]).toBe('a');
    expect(new Set(store.invalidated.slice(1, 3))).toEqual(new Set(['b', 'c']));
    expect(store.invalidated.slice(3)).toEqual(['d']);
    for (const key of ['a', 'b', 'c', 'd'])
      expect(store.get(key).entry).toMatchObject({ value: key, invalidated: true });
  });

  it('deletes a key and what was derived from it, and tells whether the key held a value', async () => {
    const store = new RecordingStore();
    await derive(store, [['a', 'b']]);
    await store.set('b', entry('b'));
    const invalidation = new Invalidation(store);
    await expect(invalidation.delete('a')).resolves.toBe(false);
    expect(store.invalidated).toEqual(['a', 'b']);
    expect(store.get('b').entry).toBeUndefined();
  });

  it('counts the keys of a tag that held a value, and invalidates the keys derived from them too', async () => {
    const store = new RecordingStore();
    const invalidation = new Invalidation(store);
    await invalidation.set('p:1', entry('one', ['products']), POLICY);
    await invalidation.set('p:2', entry('two', ['products']), POLICY);
    await store.addToIndex({ tag: 'products' }, 'p:gone', 60_000);
    await derive(store, [['p:1', 'page']]);
    await store.set('page', entry('page'));
    store.invalidated.length = 0;
    await expect(invalidation.tag('products', 'stale')).resolves.toBe(2);
    expect(store.invalidated.slice(0, 3).sort()).toEqual(['p:1', 'p:2', 'p:gone']);
    expect(store.invalidated.slice(3)).toEqual(['page']);
    expect(store.get('page').entry).toMatchObject({ invalidated: true });
    await expect(invalidation.tag('products', 'delete')).resolves.toBe(2);
    expect(store.get('p:1').entry).toBeUndefined();
  });

  it('writes a value indexed under its tags, and makes the values derived from its key stale', async () => {
    const store = new RecordingStore();
    await derive(store, [['a', 'b']]);
    await store.set('b', entry('b'));
    const invalidation = new Invalidation(store);
    await invalidation.set('a', entry('new', ['t']), POLICY);
    expect(store.get('a').entry).toMatchObject({ value: 'new', tags: ['t'] });
    expect(store.get('a').entry).not.toMatchObject({ invalidated: true });
    await expect(store.indexMembers({ tag: 't' })).resolves.toEqual(['a']);
    expect(store.invalidated).toEqual(['b']);
    expect(store.get('b').entry).toMatchObject({ invalidated: true });
  });

  it('refuses a malformed tag with one message, whether given to invalidate or to store', async () => {
    const invalidation = new Invalidation(new MemoryStore());
    const message = 'a tag must be a non-empty string of well-formed Unicode, received "t\\ud800"';
    const asArgument = await invalidation.tag('t\uD800', 'stale').catch((error: unknown) => error);
    const asOption = await invalidation
      .set('k', entry('v', ['t\uD800']), POLICY)
      .catch((error: unknown) => error);
    expect(asArgument).toBeInstanceOf(ConfigurationError);
    expect(asOption).toBeInstanceOf(ConfigurationError);
    expect(asArgument).toMatchObject({ field: 'tag', message: expect.stringContaining(message) });
    expect(asOption).toMatchObject({ field: 'tags', message: expect.stringContaining(message) });
  });
});
