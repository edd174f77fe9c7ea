import { randomUUID } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { type Entry, lifetimeLeftMs, markedStale, withVersion } from '../../core/entry.js';
import { ConfigurationError } from '../../errors/configuration.error.js';
import { FillSignals } from '../fill-signals.js';
import { HedgeBudget } from '../../core/hedge-budget.js';
import type {
  AcquireOptions,
  FillWatch,
  HedgeRequest,
  HerdStore,
  InvalidationMode,
  InvalidationResult,
  KeyIndex,
  Lease,
  LeaseAttempt,
  LeaseEnd,
  LoadOutcome,
  StoreHealth,
  StoreSnapshot,
} from '../../core/herd-store.interface.js';
import { isPassLease } from '../../core/herd-store.interface.js';
import { KeyIndexes } from './key-indexes.js';

export interface MemoryStoreOptions {
  /** Most entries kept; the least recently used go first. Default 10,000. */
  readonly maxEntries?: number;
  /** Clock (epoch ms) for lease and index expiry. Replace only in tests that move time by hand. */
  readonly now?: () => number;
}

interface HeldLease {
  readonly token: string;
  /**
   * The fence of the holder this lease was taken over from as stuck: not taken over again as stuck,
   * and that holder may still store its value while this lease holds.
   */
  readonly rescuedFrom: number | undefined;
  /** The key's version from its grant until another grant or an invalidation. */
  readonly fence: number;
  readonly expiresAt: number;
  /** How the lease's load ended, held in its place (see endLease); its token is then ''. */
  readonly outcome?: LoadOutcome;
  /** For a `failed` outcome: when the next lease may be granted. */
  readonly retryAt?: number;
}

const UP: StoreHealth = Object.freeze({ status: 'up', breaker: 'closed' });

/**
 * The embedded default: a bounded LRU of envelopes in this process. Leases and fill notifications
 * are local, so it coordinates callers of one process only; use the Redis store for many.
 * Values are kept by reference, not copied.
 *
 * Versions come from one counter for all keys. A key's version is that of its entry or of its lease
 * (whichever is newer); a key with neither reads `#floor`, the newest version given to a key whose
 * state was then dropped (an invalidation of an absent key, a removed value, a released lease), so
 * it never reads older than an invalidation it went through.
 */
export class MemoryStore implements HerdStore {
  readonly name = 'memory';
  readonly #entries: LRUCache<string, Entry>;
  /** Written by acquire/extend/release/invalidate; expired leases are swept as the map grows. */
  readonly #leases = new Map<string, HeldLease>();
  readonly #indexes: KeyIndexes;
  readonly #signals = new FillSignals();
  readonly #hedges: HedgeBudget;
  #counter = 0;
  #floor = 0;
  /**
   * The versions of the last `clear()` of each mode: an entry older than `delete` is gone, one older
   * than `stale` is stale, a lease older than either is revoked. Applied to a key when it is next
   * touched ({@link #settle}), so a clear costs one step whatever the number of keys.
   */
  readonly #cleared = { stale: 0, delete: 0, latest: 0 };
  /** Lease count after the last sweep: the next sweep runs when it has doubled. */
  #sweptAt = 64;
  readonly #now: () => number;

  constructor(options: MemoryStoreOptions = {}) {
    this.#now = options.now ?? Date.now;
    const maxEntries = options.maxEntries ?? 10_000;
    if (!Number.isInteger(maxEntries) || maxEntries < 1) {
      throw new ConfigurationError(
        'store.maxEntries',
        `expected a positive integer, received ${maxEntries}`,
      );
    }
    this.#entries = new LRUCache<string, Entry>({
      max: maxEntries,
      // A value that leaves (evicted, expired, removed) takes its version with it: keep the floor
      // above it.
      dispose: (entry, key, reason) => {
        if (reason !== 'set' && !this.#leases.has(key))
          this.#floor = Math.max(this.#floor, entry.version);
      },
    });
    this.#indexes = new KeyIndexes(this.#now);
    this.#hedges = new HedgeBudget(this.#now);
  }

  /** Entries held now (for tests and metrics). */
  get size(): number {
    return this.#entries.size;
  }

  /** Leases held now, including expired ones not yet swept (bounded: swept as the map grows). */
  get leases(): number {
    return this.#leases.size;
  }

  /** Followers currently registered for fill notifications. */
  get watchers(): number {
    return this.#signals.size;
  }

  get(key: string): StoreSnapshot {
    this.#settle(key);
    const entry = this.#entries.get(key);
    const lease = this.#leases.get(key);
    if (lease === undefined && entry !== undefined) return { entry, version: entry.version };
    const version = this.#versionOf(entry, lease);
    const outcome =
      lease !== undefined && lease.expiresAt > this.#now() ? lease.outcome : undefined;
    return outcome === undefined ? { entry, version } : { entry, version, outcome };
  }

  async fill(key: string, entry: Entry, lease: Lease | undefined): Promise<boolean> {
    this.#indexes.maybeSweep();
    if (lease === undefined) return false;
    this.#settle(key);
    const held = this.#leases.get(key);
    const version = this.#versionOf(this.#entries.get(key), held);
    const rescued = held?.rescuedFrom === lease.fence && held.expiresAt > this.#now();
    const written = isPassLease(lease)
      ? held?.outcome?.kind === 'pass' &&
        held.outcome.fence === lease.fence &&
        held.expiresAt > this.#now() &&
        version === lease.fence
      : version === lease.fence || rescued;
    if (written) this.#write(key, withVersion(entry, version));
    // Released; or, once its value is stored, an outcome the holder it rescued left is over.
    if (held !== undefined && (held.token === lease.token || (written && held.outcome)))
      this.#leases.delete(key);
    this.#signals.notify(key);
    return written;
  }

  async set(key: string, entry: Entry): Promise<number> {
    this.#indexes.maybeSweep();
    const version = this.#advance(key);
    this.#write(key, withVersion(entry, version));
    this.#signals.notify(key);
    return version;
  }

  async invalidate(key: string, mode: InvalidationMode): Promise<InvalidationResult> {
    this.#settle(key);
    const version = this.#advance(key);
    const entry = this.#entries.get(key);
    if (entry !== undefined && mode === 'stale') this.#rewrite(key, markedStale(entry, version));
    else {
      this.#entries.delete(key);
      this.#floor = version;
    }
    this.#signals.notify(key);
    return { existed: entry !== undefined, version };
  }

  async clear(mode: InvalidationMode): Promise<void> {
    const version = ++this.#counter;
    this.#cleared[mode] = version;
    this.#cleared.latest = version;
    this.#floor = version;
    this.#signals.notifyAll();
  }

  async addToIndex(index: KeyIndex, key: string, ttlMs: number): Promise<void> {
    this.#indexes.add(index, key, ttlMs);
  }

  async indexMembers(index: KeyIndex): Promise<string[]> {
    return this.#indexes.members(index);
  }

  async invalidatedWithin(index: KeyIndex, withinMs: number): Promise<boolean> {
    return this.#indexes.invalidatedWithin(index, withinMs);
  }

  async acquireLease(
    key: string,
    ttlMs: number,
    options: AcquireOptions = {},
  ): Promise<LeaseAttempt> {
    this.#settle(key);
    const now = this.#now();
    const entry = this.#entries.get(key);
    const held = this.#leases.get(key);
    const version = this.#versionOf(entry, held);
    const outcome = held !== undefined && held.expiresAt > now ? held.outcome : undefined;
    // A failure held for the backoff lets one lease in once its retry time has come.
    const retryDue = outcome?.kind === 'failed' && (held?.retryAt ?? 0) <= now;
    const free = held === undefined || held.expiresAt <= now || retryDue;
    const stuck = options.takeover === 'stuck';
    // A stuck holder is taken over once; an outcome only by force (refresh()).
    const takeover =
      !free &&
      options.takeoverFrom === version &&
      !(stuck && (held.rescuedFrom !== undefined || outcome !== undefined));
    if (!free && !takeover) return { lease: undefined, current: { entry, version }, outcome };
    const lease: Lease = { key, token: randomUUID(), fence: ++this.#counter, ttlMs };
    this.#leases.set(key, {
      token: lease.token,
      fence: lease.fence,
      expiresAt: now + ttlMs,
      rescuedFrom: takeover && stuck ? version : undefined,
    });
    if (this.#leases.size >= this.#sweptAt * 2) this.#sweepLeases(now);
    const current = { entry, version: lease.fence };
    return outcome?.kind === 'failed' ? { lease, current, outcome } : { lease, current };
  }

  async extendLease(lease: Lease, ttlMs: number): Promise<boolean> {
    this.#settle(lease.key);
    const held = this.#leases.get(lease.key);
    const now = this.#now();
    if (held === undefined || held.token !== lease.token || held.expiresAt <= now) return false;
    this.#leases.set(lease.key, { ...held, expiresAt: now + ttlMs });
    return true;
  }

  async releaseLease(lease: Lease): Promise<void> {
    const held = this.#leases.get(lease.key);
    if (held === undefined || held.token !== lease.token) return;
    this.#dropLease(lease.key, held);
    this.#signals.notify(lease.key);
  }

  async endLease(lease: Lease, end: LeaseEnd): Promise<boolean> {
    this.#settle(lease.key);
    const held = this.#leases.get(lease.key);
    const now = this.#now();
    if (held === undefined || held.expiresAt <= now) return false;
    // The holder a takeover rescued still ends the load, at the takeover's fence: the first result
    // answers every waiter.
    if (held.token !== lease.token && (held.rescuedFrom !== lease.fence || held.outcome))
      return false;
    const failed = end.outcome.kind === 'failed';
    this.#leases.set(lease.key, {
      token: '',
      fence: held.fence,
      // A takeover's failure leaves the holder it rescued free to store its value over it.
      rescuedFrom: failed && held.token === lease.token ? held.rescuedFrom : undefined,
      expiresAt: now + end.holdMs + (failed ? end.rememberMs : 0),
      outcome: { ...end.outcome, fence: held.fence },
      retryAt: failed ? now + end.holdMs : undefined,
    });
    this.#signals.notify(lease.key);
    return true;
  }

  async hedge(request: HedgeRequest): Promise<boolean> {
    return this.#hedges.take(request);
  }

  watchFill(key: string): FillWatch {
    return this.#signals.watch(key);
  }

  health(): StoreHealth {
    return UP;
  }

  async close(): Promise<void> {
    this.#signals.notifyAll();
    this.#entries.clear();
    this.#leases.clear();
    this.#indexes.clear();
  }

  /**
   * Applies the clears `key` has not been through yet: its lease (if granted before) is revoked,
   * its entry (if written before) removed or marked stale at the clear's version. One comparison
   * when there is nothing to apply.
   */
  #settle(key: string): void {
    const { latest } = this.#cleared;
    if (latest === 0) return;
    const held = this.#leases.get(key);
    if (held !== undefined && held.fence < latest) {
      this.#leases.delete(key);
      this.#floor = Math.max(this.#floor, latest);
    }
    const entry = this.#entries.peek(key);
    if (entry === undefined || entry.version >= latest) return;
    // Older than the latest clear: removed if a delete came after it, else the latest was a stale.
    if (entry.version < this.#cleared.delete) this.#entries.delete(key);
    else this.#rewrite(key, markedStale(entry, latest));
  }

  /**
   * The key's version: its entry's or its lease's, whichever is newer; the floor when it has
   * neither.
   */
  #versionOf(entry: Entry | undefined, lease: HeldLease | undefined): number {
    if (entry === undefined && lease === undefined) return this.#floor;
    return Math.max(entry?.version ?? 0, lease?.fence ?? 0);
  }

  /** A new version for `key`; its lease, if any, is revoked (the holder's load is fenced). */
  #advance(key: string): number {
    this.#leases.delete(key);
    return ++this.#counter;
  }

  #write(key: string, entry: Entry): void {
    this.#entries.set(key, entry, { ttl: lifetimeLeftMs(entry) });
  }

  /** Replaces the entry, keeping the time it has left. */
  #rewrite(key: string, entry: Entry): void {
    this.#entries.set(key, entry, { ttl: Math.max(1, this.#entries.getRemainingTTL(key)) });
  }

  #dropLease(key: string, held: HeldLease): void {
    this.#leases.delete(key);
    if (!this.#entries.has(key)) this.#floor = Math.max(this.#floor, held.fence);
  }

  #sweepLeases(now: number): void {
    for (const [key, held] of this.#leases) if (held.expiresAt <= now) this.#dropLease(key, held);
    this.#sweptAt = Math.max(64, this.#leases.size);
  }
}
