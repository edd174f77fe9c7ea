import { randomUUID } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { type Entry, markedStale } from '../../core/entry.js';
import { ConfigurationError } from '../../errors/configuration.error.js';
import { FillSignals } from '../fill-signals.js';
import type {
  FillWatch,
  HerdStore,
  Lease,
  LeaseAttempt,
  SetOptions,
  StoreHealth,
  StoreRead,
} from '../herd-store.interface.js';

export interface MemoryStoreOptions {
  /** Most entries kept; the least recently used go first. Default 10,000. */
  readonly maxEntries?: number;
  /** Clock (epoch ms) for lease expiry. Replace only in tests that move time by hand. */
  readonly now?: () => number;
}

interface HeldLease {
  readonly token: string;
  readonly fence: number;
  readonly expiresAt: number;
}

const UP: StoreHealth = Object.freeze({ status: 'up', breaker: 'closed' });

/**
 * The embedded default: a bounded LRU of envelopes in this process. Leases and fill notifications
 * are local, so it coordinates callers of one process only; use the Redis store for many.
 * Values are kept by reference, not copied.
 */
export class MemoryStore implements HerdStore {
  readonly name = 'memory';
  readonly #entries: LRUCache<string, Entry>;
  readonly #leases = new Map<string, HeldLease>();
  readonly #tags = new Map<string, Set<string>>();
  readonly #signals = new FillSignals();
  /** One counter for all keys: it increases with every lease granted, on any key. */
  #fence = 0;
  readonly #now: () => number;

  constructor(options: MemoryStoreOptions = {}) {
    this.#now = options.now ?? Date.now;
    const maxEntries = options.maxEntries ?? 10_000;
    if (!Number.isInteger(maxEntries) || maxEntries < 1) {
      throw new ConfigurationError('store.maxEntries', `expected a positive integer, received ${maxEntries}`);
    }
    this.#entries = new LRUCache<string, Entry>({
      max: maxEntries,
      dispose: (entry, key) => this.#untag(key, entry),
    });
  }

  /** Entries held now (for tests and metrics). */
  get size(): number {
    return this.#entries.size;
  }

  /** Followers currently registered for fill notifications. */
  get watchers(): number {
    return this.#signals.size;
  }

  get(key: string): StoreRead {
    return this.#entries.get(key);
  }

  async set(key: string, entry: Entry, options: SetOptions = {}): Promise<boolean> {
    const existing = this.#entries.get(key);
    const written = existing === undefined || existing.createdAt <= entry.createdAt;
    if (written) this.#write(key, entry);
    if (options.lease !== undefined) this.#release(options.lease);
    this.#signals.notify(key);
    return written;
  }

  /** Removes the entry and any lease on the key (a lease held for backoff would block the reload), and wakes followers. */
  async delete(key: string): Promise<void> {
    this.#entries.delete(key);
    this.#leases.delete(key);
    this.#signals.notify(key);
  }

  async markStale(key: string, now: number): Promise<boolean> {
    const entry = this.#entries.get(key);
    if (entry === undefined) return false;
    this.#write(key, markedStale(entry, now));
    this.#signals.notify(key);
    return true;
  }

  async keysForTag(tag: string): Promise<string[]> {
    return [...(this.#tags.get(tag) ?? [])];
  }

  async acquireLease(key: string, ttlMs: number): Promise<LeaseAttempt> {
    const now = this.#now();
    const held = this.#leases.get(key);
    if (held !== undefined && held.expiresAt > now) return { lease: undefined, current: this.get(key) };
    const lease: Lease = { key, token: randomUUID(), fence: ++this.#fence };
    this.#leases.set(key, { token: lease.token, fence: lease.fence, expiresAt: now + ttlMs });
    return { lease, current: this.get(key) };
  }

  async extendLease(lease: Lease, ttlMs: number): Promise<boolean> {
    const held = this.#leases.get(lease.key);
    const now = this.#now();
    if (held === undefined || held.token !== lease.token || held.expiresAt <= now) return false;
    this.#leases.set(lease.key, { ...held, expiresAt: now + ttlMs });
    return true;
  }

  async releaseLease(lease: Lease): Promise<void> {
    if (this.#release(lease)) this.#signals.notify(lease.key);
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
  }

  #write(key: string, entry: Entry): void {
    const ttl = Math.max(1, Math.ceil(entry.hardExpireAt - this.#now()));
    this.#entries.set(key, entry, { ttl });
    for (const tag of entry.tags ?? []) {
      let keys = this.#tags.get(tag);
      if (keys === undefined) {
        keys = new Set();
        this.#tags.set(tag, keys);
      }
      keys.add(key);
    }
  }

  #untag(key: string, entry: Entry): void {
    for (const tag of entry.tags ?? []) {
      const keys = this.#tags.get(tag);
      if (keys === undefined) continue;
      keys.delete(key);
      if (keys.size === 0) this.#tags.delete(tag);
    }
  }

  /** Removes the lease if `lease` still owns it; true when it did. */
  #release(lease: Lease): boolean {
    const held = this.#leases.get(lease.key);
    if (held === undefined || held.token !== lease.token) return false;
    this.#leases.delete(lease.key);
    return true;
  }
}
