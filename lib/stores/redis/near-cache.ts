import { LRUCache } from 'lru-cache';
import { type Entry, decodeEntry, lifetimeLeftMs, markedStale } from '../../core/entry.js';
import { CORRUPT_ENTRY, type InvalidationMode, type StoreRead, type StoreSnapshot } from '../herd-store.interface.js';

/** Bounds of the in-process copies. */
export interface NearCacheOptions {
  /** Most keys kept; the least recently used go first. Default 10,000. */
  readonly maxEntries?: number;
  /** Most bytes kept (envelopes as UTF-16 strings, plus a little per key). Default 64 MiB. */
  readonly maxBytes?: number;
}

export const NEAR_CACHE_DEFAULTS: Required<NearCacheOptions> = Object.freeze({
  maxEntries: 10_000,
  maxBytes: 64 * 1024 * 1024,
});

/** What a copy costs besides its envelope: the key, the entry object, the LRU's bookkeeping. */
const OVERHEAD_BYTES = 200;
/** Versions announced per key are remembered this many keys back (to refuse an older read's copy). */
const ANNOUNCED_KEYS = 10_000;

interface Copy {
  /** What a hit returns: the entry and its version, one object for every hit. */
  readonly snapshot: StoreSnapshot & { readonly entry: Entry };
  /** The string it was read from (`undefined` when not known): an unchanged one is not decoded again. */
  readonly raw: string | undefined;
  /** Loaded by this process while Redis could not be reached: newer than anything Redis may hold. */
  readonly local: boolean;
  readonly bytes: number;
}

/**
 * Copies of envelopes in this process, bounded by keys and bytes (least recently used first). They
 * follow every change this process makes or hears of: a fill or a write replaces a copy, an
 * invalidation marks it stale or drops it, and a copy older than a version already announced for
 * its key is never kept. The store answers hits from them while its notifications are known to be
 * live, and, as stale, while Redis cannot answer.
 */
export class NearCache {
  readonly #copies: LRUCache<string, Copy>;
  /** The newest version announced per key (by a notification or a change made here). */
  readonly #announced = new LRUCache<string, number>({ max: ANNOUNCED_KEYS });

  constructor(options: NearCacheOptions = {}) {
    const { maxEntries, maxBytes } = { ...NEAR_CACHE_DEFAULTS, ...options };
    this.#copies = new LRUCache({ max: maxEntries, maxSize: maxBytes, sizeCalculation: (copy) => copy.bytes });
    // Copies leave at their hard expiry, as the envelopes in Redis do (a TTL per copy).
  }

  /** Keys held now. */
  get size(): number {
    return this.#copies.size;
  }

  /** Bytes held now, as counted against `maxBytes`. */
  get bytes(): number {
    return this.#copies.calculatedSize;
  }

  /** The copy of `key` (its last known state) as a read's answer, or `undefined`. */
  hit(key: string): StoreSnapshot | undefined {
    return this.#copies.get(key)?.snapshot;
  }

  /** Decodes what Redis returned for `key`, reusing the decoded entry when the string is unchanged, and keeps it. */
  decode(key: string, raw: string | null): StoreRead {
    if (raw === null) return undefined;
    const copy = this.#copies.get(key);
    if (copy !== undefined && copy.raw === raw) return copy.snapshot.entry;
    const entry = decodeEntry(raw);
    if (entry === undefined) return CORRUPT_ENTRY;
    this.keep(key, entry, raw);
    return entry;
  }

  /**
   * Keeps `entry` (encoded as `envelope`, when known) as the copy of `key`, unless a newer version
   * of the key is known: a read sent before an invalidation may answer after its notification. A
   * value this process loaded while Redis was away (`local`) replaces any copy.
   */
  keep(
    key: string,
    entry: Entry,
    envelope: string | undefined,
    options: { local?: boolean; raw?: boolean } = {},
  ): void {
    const local = options.local === true;
    const copy = this.#copies.get(key);
    if (
      !local &&
      (entry.version < (this.#announced.get(key) ?? 0) || (copy?.snapshot.entry.version ?? 0) > entry.version)
    ) {
      return;
    }
    const bytes = OVERHEAD_BYTES + 2 * (envelope?.length ?? 0);
    const raw = options.raw === false ? undefined : envelope;
    this.#copies.set(
      key,
      { snapshot: { entry, version: entry.version }, raw, local, bytes },
      { ttl: lifetimeLeftMs(entry) },
    );
  }

  /** A change of `key` at `version` (a fill, a write, an invalidation) was announced. */
  announce(key: string, version: number): void {
    if (version > (this.#announced.get(key) ?? 0)) this.#announced.set(key, version);
  }

  /** An invalidation of `key` at `version` made here or heard of. */
  invalidated(key: string, mode: InvalidationMode, version: number): void {
    this.announce(key, version);
    const copy = this.#copies.get(key);
    if (copy === undefined || copy.snapshot.entry.version >= version) return;
    if (mode === 'delete') this.#copies.delete(key);
    else {
      const entry = markedStale(copy.snapshot.entry, version);
      const ttl = Math.max(1, this.#copies.getRemainingTTL(key));
      this.#copies.set(key, { ...copy, snapshot: { entry, version }, raw: undefined }, { ttl });
    }
  }

  /** A new value of `key` at `version` was announced without its envelope: the copy is outdated. */
  replaced(key: string, version: number): void {
    this.announce(key, version);
    const copy = this.#copies.get(key);
    if (copy !== undefined && copy.snapshot.entry.version < version) this.#copies.delete(key);
  }

  /** What to answer for `key` while Redis cannot: stale, unless this process loaded it meanwhile. */
  fallback(key: string): Entry | undefined {
    const copy = this.#copies.get(key);
    if (copy === undefined) return undefined;
    const { entry } = copy.snapshot;
    return copy.local || entry.invalidated === true ? entry : markedStale(entry, entry.version);
  }

  /** Forgets every copy (they may have missed notifications). */
  clear(): void {
    this.#copies.clear();
  }
}
