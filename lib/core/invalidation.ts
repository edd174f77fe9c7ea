import { ConfigurationError } from '../errors/configuration.error.js';
import { assertTags } from '../keys/valid-key.js';
import type { Entry } from './entry.js';
import type { HerdStore, InvalidationMode, KeyIndex } from './herd-store.interface.js';
import { type ResolvedPolicy, maxLifetimeMs } from './policy.js';

/** How `clear()` leaves every key: marked stale (served stale until its one refresh lands) or removed. */
export type ClearMode = 'expire' | 'delete';

const CLEAR_MODES: Readonly<Record<ClearMode, InvalidationMode>> = {
  expire: 'stale',
  delete: 'delete',
};

/**
 * Store commands in flight at once while invalidating many keys (a tag, the dependents of a key).
 */
export const INVALIDATION_CONCURRENCY = 64;

/**
 * Writes and invalidations. Each one advances the key's version in the store (also for an absent
 * key), which revokes its lease and fences every load of it already running; then the keys derived
 * from it (values whose loaders read it) are invalidated the same way, transitively, before the
 * call resolves.
 */
export class Invalidation {
  readonly #store: HerdStore;
  readonly #landed: (keys: readonly string[] | 'all') => void;

  /**
   * `landed` is told of each key (or of every key, for a clear) once its write or invalidation has
   * ended, applied or not: a read that starts after it must not be answered by a load that began
   * before it.
   */
  constructor(store: HerdStore, landed: (keys: readonly string[] | 'all') => void = () => {}) {
    this.#store = store;
    this.#landed = landed;
  }

  /**
   * Writes `entry` as the key's value (write-through); values derived from the key go stale. When
   * the value was written but not recorded under its tags, it is marked stale (a tag invalidation
   * would miss it) and the call rejects with the index error.
   */
  async set(key: string, entry: Entry, policy: ResolvedPolicy): Promise<void> {
    const store = this.#store;
    // Indexed before the write (a tag invalidated between the two cannot miss the new value), and
    // sent together with it, so writes of one process reach the store in the order they were made.
    assertTags(entry.tags ?? []);
    const ttlMs = maxLifetimeMs(policy);
    const indexed = Promise.all(
      (entry.tags ?? []).map((tag) => store.addToIndex({ tag }, key, ttlMs)),
    );
    const [index, written] = await Promise.allSettled([indexed, store.set(key, entry)]);
    this.#landed([key]);
    if (written.status === 'rejected') throw written.reason;
    if (index.status === 'rejected') await this.#invalidate(key, 'stale');
    await this.#cascade([key], 'stale');
    if (index.status === 'rejected') throw index.reason;
  }

  /** Marks `key` and its dependents stale; true when `key` held a value. */
  async expire(key: string): Promise<boolean> {
    const { existed } = await this.#invalidate(key, 'stale');
    await this.#cascade([key], 'stale');
    return existed;
  }

  async delete(key: string): Promise<boolean> {
    const { existed } = await this.#invalidate(key, 'delete');
    await this.#cascade([key], 'delete');
    return existed;
  }

  /**
   * Marks the values derived from `key` stale (not `key` itself): its value was replaced before it
   * expired, by `refresh()` or `warm()`, which is an invalidation followed by a load.
   */
  async dependentsOf(key: string): Promise<void> {
    await this.#cascade([key], 'stale');
  }

  /**
   * Invalidates every key stored with `tag`, and their dependents; resolves how many held a value.
   */
  async tag(tag: string, mode: InvalidationMode): Promise<number> {
    assertTags([tag], 'tag');
    const keys = await this.#store.indexMembers({ tag });
    const existed = await this.#invalidateAll(keys, mode);
    await this.#cascade(keys, mode);
    return existed;
  }

  /**
   * Invalidates every key in one store step (see {@link HerdStore.clear}). Dependents need no
   * cascade: they are keys of the same store, cleared alike.
   */
  async clear(mode: ClearMode): Promise<void> {
    const storeMode = Object.hasOwn(CLEAR_MODES, mode) ? CLEAR_MODES[mode] : undefined;
    if (storeMode === undefined) {
      throw new ConfigurationError(
        'clear.mode',
        `expected 'expire' or 'delete', received ${typeof mode === 'string' ? `'${mode}'` : typeof mode}`,
      );
    }
    if (this.#store.clear === undefined) {
      throw new ConfigurationError(
        'store',
        `the ${this.#store.name} store cannot clear(): use a store that implements HerdStore.clear`,
      );
    }
    try {
      await this.#store.clear(storeMode);
    } finally {
      this.#landed('all');
    }
  }

  /** Invalidates, breadth first, every key derived from `roots` (each once, cycles included). */
  async #cascade(roots: readonly string[], mode: InvalidationMode): Promise<void> {
    const seen = new Set(roots);
    let frontier = roots;
    while (frontier.length > 0) {
      const found = await inBatches(frontier, (key) => this.#store.indexMembers(inputOf(key)));
      const next = [...new Set(found.flat())].filter((key) => !seen.has(key));
      for (const key of next) seen.add(key);
      await this.#invalidateAll(next, mode);
      frontier = next;
    }
  }

  async #invalidateAll(keys: readonly string[], mode: InvalidationMode): Promise<number> {
    const results = await inBatches(keys, (key) => this.#invalidate(key, mode));
    return results.filter((result) => result.existed).length;
  }

  async #invalidate(key: string, mode: InvalidationMode): Promise<{ existed: boolean }> {
    try {
      return await this.#store.invalidate(key, mode);
    } finally {
      this.#landed([key]);
    }
  }
}

function inputOf(key: string): KeyIndex {
  return { inputOf: key };
}

/**
 * Runs `task` over `items`, at most {@link INVALIDATION_CONCURRENCY} at a time, in order of
 * results.
 */
async function inBatches<I, R>(items: readonly I[], task: (item: I) => Promise<R>): Promise<R[]> {
  const results: R[] = [];
  for (let start = 0; start < items.length; start += INVALIDATION_CONCURRENCY) {
    results.push(
      ...(await Promise.all(items.slice(start, start + INVALIDATION_CONCURRENCY).map(task))),
    );
  }
  return results;
}
