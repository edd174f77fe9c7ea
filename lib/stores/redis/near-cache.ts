import { LRUCache } from 'lru-cache';
import {
  type Entry,
  decodeEntry,
  isLaterFormat,
  lifetimeLeftMs,
  markedStale,
} from '../../core/entry.js';
import {
  CORRUPT_ENTRY,
  type InvalidationMode,
  type StoreRead,
  type StoreSnapshot,
} from '../../core/herd-store.interface.js';
import { estimateHeapBytes } from './heap-size.js';

/** Bounds of the in-process copies. */
export interface NearCacheOptions {
  /** Most keys kept; the least recently used go first. Default 10,000. */
  readonly maxEntries?: number;
  /**
   * Most bytes kept, as estimated: each copy's envelope (as a UTF-16 string), its decoded value's
   * heap size (a bounded estimate), plus a little per key. Default 64 MiB.
   */
  readonly maxBytes?: number;
}

export const NEAR_CACHE_DEFAULTS: Required<NearCacheOptions> = Object.freeze({
  maxEntries: 10_000,
  maxBytes: 64 * 1024 * 1024,
});

/** What a copy costs besides its envelope: the key, the entry object, the LRU's bookkeeping. */
const OVERHEAD_BYTES = 200;
/**
 * Versions announced per key are remembered this many keys back (to refuse an older read's copy).
 */
const ANNOUNCED_KEYS = 10_000;

/** What a store with a near cache reports of it (read by the Prometheus metrics). */
export interface NearCacheReport {
  /** Keys held now. */
  readonly entries: number;
  /** Bytes held now, as counted against `maxBytes`. */
  readonly bytes: number;
  /** Whether notifications are in time, so that copies may answer hits. */
  readonly trusted: boolean;
  /** Reads asked of the store since it opened. */
  readonly reads: number;
  /** Of those, the reads a copy answered without a round trip to Redis. */
  readonly hits: number;
}

/**
 * The newest version announced for a key, and the announcement's place in this cache's sequence.
 */
interface Announcement {
  readonly version: number;
  readonly at: number;
}

/** What a copy is kept with. */
export interface KeepOptions {
  /** `false` when `envelope` is not the string Redis holds (a write whose version Redis set). */
  readonly raw?: boolean;
  /**
   * The {@link NearCache.mark} taken when the read that returned it was sent: a copy read before
   * something this cache can no longer check (a clear, a forgotten announcement) is not kept.
   */
  readonly since?: number;
}

interface Copy {
  /** What a hit returns: the entry and its version, one object for every hit. */
  readonly snapshot: StoreSnapshot & { readonly entry: Entry };
  /**
   * The string it was read from (`undefined` when not known): an unchanged one is not decoded
   * again.
   */
  readonly raw: string | undefined;
  readonly bytes: number;
}

/**
 * Copies of envelopes in this process, bounded by keys and bytes (least recently used first). They
 * follow every change this process makes or hears of: a fill or a write replaces a copy, an
 * invalidation marks it stale or drops it, and a copy older than a version already announced for
 * its key is never kept. The store answers hits from them while its notifications are known to be
 * live, and, as stale, while Redis cannot answer.
 *
 * Values this process loaded without the store's word (no lease: Redis could not be asked) are
 * kept apart, as local copies: never a hit, only this process's answer while Redis cannot answer.
 * A local copy carries the version its load started from and loses to anything newer (a copy of a
 * newer version, a change announced since); the store drops them all when Redis answers again.
 */
export class NearCache {
  readonly #copies: LRUCache<string, Copy>;
  readonly #local: LRUCache<string, Copy>;
  /** The newest version announced per key (by a notification or a change made here). */
  readonly #announced: LRUCache<string, Announcement>;
  /** Counts announcements and clears: {@link mark} reads it when a read is sent. */
  #sequence = 0;
  /**
   * Reads sent before this point in the sequence are not kept: a clear happened since, or the
   * announcement of a key was forgotten (evicted) that a read sent earlier could predate.
   */
  #trustedFrom = 0;

  constructor(options: NearCacheOptions = {}) {
    this.#announced = new LRUCache<string, Announcement>({
      max: ANNOUNCED_KEYS,
      dispose: (announcement, _key, reason) => {
        if (reason === 'evict') this.#trustedFrom = Math.max(this.#trustedFrom, announcement.at);
      },
    });
    const { maxEntries, maxBytes } = { ...NEAR_CACHE_DEFAULTS, ...options };
    this.#copies = new LRUCache({
      max: maxEntries,
      maxSize: maxBytes,
      sizeCalculation: (copy) => copy.bytes,
    });
    this.#local = new LRUCache({
      max: maxEntries,
      maxSize: maxBytes,
      sizeCalculation: (copy) => copy.bytes,
    });
    // Copies leave at their hard expiry, as the envelopes in Redis do (a TTL per copy).
  }

  /** Copies held now (local ones included). */
  get size(): number {
    return this.#copies.size + this.#local.size;
  }

  /** Bytes held now, as counted against `maxBytes` (local copies have a bound of their own). */
  get bytes(): number {
    return this.#copies.calculatedSize + this.#local.calculatedSize;
  }

  /** The copy of `key` (its last known state) as a read's answer, or `undefined`. */
  hit(key: string): StoreSnapshot | undefined {
    return this.#copies.get(key)?.snapshot;
  }

  /** The newest version of `key` known here (announced, or of the copy held); 0 when none. */
  knownVersion(key: string): number {
    return this.#newestKnown(key);
  }

  /** Whether a copy of `key` is held (without touching its recency). */
  has(key: string): boolean {
    return this.#copies.has(key) || this.#local.has(key);
  }

  /**
   * Where the sequence stands: taken when a read is sent, passed back as `since` with its reply.
   */
  mark(): number {
    return this.#sequence;
  }

  /**
   * Decodes what Redis returned for `key`, reusing the decoded entry when the string is unchanged
   * (unless `reuse` is false), and keeps it. A read that found no value (`raw` null) at the key's `version` drops a copy of
   * that version or older: it was deleted or expired there, and the copy must not answer for it
   * later (as stale, or while Redis is away).
   */
  decode(
    key: string,
    raw: string | null,
    since?: number,
    version?: number,
    reuse = true,
  ): StoreRead {
    if (raw === null) return this.#absent(key, version);
    const copy = this.#copies.get(key);
    if (reuse && copy !== undefined && copy.raw === raw) return copy.snapshot.entry;
    const entry = decodeEntry(raw);
    // A later release's envelope: absent here (a miss), and it replaced what a copy holds.
    if (entry === undefined) return isLaterFormat(raw) ? this.#absent(key, version) : CORRUPT_ENTRY;
    this.keep(key, entry, raw, since === undefined ? {} : { since });
    return entry;
  }

  /**
   * Keeps `entry` (encoded as `envelope`, when known) as the copy of `key`, unless a newer version
   * of the key is known: a read sent before an invalidation may answer after its notification.
   */
  keep(key: string, entry: Entry, envelope: string, options: KeepOptions = {}): void {
    if (options.since !== undefined && options.since < this.#trustedFrom) return;
    if (entry.version < this.#newestKnown(key)) return;
    const raw = options.raw === false ? undefined : envelope;
    this.#copies.set(key, copyOf(entry, envelope, raw), { ttl: lifetimeLeftMs(entry) });
  }

  /**
   * Keeps `entry`, loaded here without the store's word from the key's version `entry.version`, as
   * the local copy of `key`: unless anything newer of the key is known (a copy, a change announced
   * since its load began), which it must not hide.
   */
  keepLocal(key: string, entry: Entry, envelope: string): void {
    const newest = Math.max(this.#newestKnown(key), this.#local.get(key)?.snapshot.version ?? 0);
    if (entry.version < newest) return;
    this.#local.set(key, copyOf(entry, envelope, undefined), { ttl: lifetimeLeftMs(entry) });
  }

  /** Redis answers again: what was loaded without its word is dropped (see {@link keepLocal}). */
  dropLocal(): void {
    this.#local.clear();
  }

  /** A change of `key` at `version` (a fill, a write, an invalidation) was announced. */
  announce(key: string, version: number): void {
    this.#sequence += 1;
    if (version > this.#announcedVersion(key))
      this.#announced.set(key, { version, at: this.#sequence });
    const local = this.#local.get(key);
    if (local !== undefined && local.snapshot.version < version) this.#local.delete(key);
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

  /**
   * What to answer for `key` while Redis cannot: what this process loaded meanwhile, else the copy
   * as stale.
   */
  fallback(key: string): Entry | undefined {
    const local = this.#local.get(key);
    const copy = this.#copies.get(key);
    if (local !== undefined && local.snapshot.version >= (copy?.snapshot.version ?? 0))
      return local.snapshot.entry;
    if (copy === undefined) return undefined;
    const { entry } = copy.snapshot;
    return entry.invalidated === true ? entry : markedStale(entry, entry.version);
  }

  /**
   * Forgets every copy (they may have missed notifications), and refuses those of reads sent
   * before.
   */
  clear(): void {
    this.#copies.clear();
    this.#local.clear();
    this.#sequence += 1;
    this.#trustedFrom = this.#sequence;
  }

  /** `key` holds nothing this release reads at `version`: a copy of that version or older goes. */
  #absent(key: string, version: number | undefined): undefined {
    const copy = this.#copies.get(key);
    if (copy !== undefined && version !== undefined && copy.snapshot.entry.version <= version) {
      this.#copies.delete(key);
    }
    return undefined;
  }

  #announcedVersion(key: string): number {
    return this.#announced.get(key)?.version ?? 0;
  }

  /** The newest version of `key` known here: announced, or of the copy held. */
  #newestKnown(key: string): number {
    return Math.max(this.#announcedVersion(key), this.#copies.get(key)?.snapshot.version ?? 0);
  }
}

function copyOf(entry: Entry, envelope: string, raw: string | undefined): Copy {
  const bytes =
    OVERHEAD_BYTES + 2 * envelope.length + estimateHeapBytes(entry.value, envelope.length);
  return { snapshot: { entry, version: entry.version }, raw, bytes };
}
