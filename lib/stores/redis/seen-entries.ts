import { LRUCache } from 'lru-cache';
import { type Entry, decodeEntry, markedStale } from '../../core/entry.js';
import { CORRUPT_ENTRY, type InvalidationMode, type StoreRead } from '../herd-store.interface.js';

interface Seen {
  readonly entry: Entry;
  /** The string it was read from (`undefined` when not known): an unchanged one is not decoded again. */
  readonly raw: string | undefined;
  /** Loaded by this process while Redis could not be reached: newer than anything Redis may hold. */
  readonly local: boolean;
}

/**
 * The newest envelope this process saw per key (bounded, least recently used first): reused when
 * Redis returns the same string again, and answered from while Redis cannot answer. It follows
 * the invalidations this process hears of; what it answers with is stale unless this process
 * loaded it itself while Redis was away (a value seen earlier may have been invalidated since, in
 * a message this process missed).
 */
export class SeenEntries {
  /** `undefined` when keeping nothing (`fallbackEntries: 0`). */
  readonly #seen: LRUCache<string, Seen> | undefined;

  constructor(maxEntries: number) {
    this.#seen = maxEntries > 0 ? new LRUCache({ max: maxEntries }) : undefined;
  }

  /** Decodes what Redis returned for `key`, reusing the decoded entry when the string is unchanged. */
  decode(key: string, raw: string | null): StoreRead {
    if (raw === null) return undefined;
    const seen = this.#seen?.get(key);
    if (seen !== undefined && seen.raw === raw) return seen.entry;
    const entry = decodeEntry(raw);
    if (entry === undefined) return CORRUPT_ENTRY;
    this.remember(key, entry, raw);
    return entry;
  }

  /** Keeps `entry` unless a newer version of the key was seen. */
  remember(key: string, entry: Entry, raw: string | undefined, local = false): void {
    const seen = this.#seen?.get(key);
    if (seen === undefined || seen.entry.version <= entry.version) this.#seen?.set(key, { entry, raw, local });
  }

  /** An invalidation of `key` at `version` reached this process. */
  invalidated(key: string, mode: InvalidationMode, version: number): void {
    const seen = this.#seen?.get(key);
    if (seen === undefined || seen.entry.version >= version) return;
    if (mode === 'delete') this.#seen?.delete(key);
    else this.#seen?.set(key, { entry: markedStale(seen.entry, version), raw: undefined, local: false });
  }

  /** What to answer for `key` while Redis cannot: stale, unless this process loaded it meanwhile. */
  fallback(key: string): Entry | undefined {
    const seen = this.#seen?.get(key);
    if (seen === undefined) return undefined;
    return seen.local || seen.entry.invalidated === true ? seen.entry : markedStale(seen.entry, seen.entry.version);
  }
}
