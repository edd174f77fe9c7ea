import type { Entry } from '../core/entry.js';

/** Returned by {@link HerdStore.get} for an entry that exists but cannot be decoded. Counted as a miss. */
export const CORRUPT_ENTRY: unique symbol = Symbol('herd-guard.corrupt-entry');

/** What a store read found: an envelope, nothing, or something unreadable. */
export type StoreRead = Entry | undefined | typeof CORRUPT_ENTRY;

/** The right to fill one key, held by one caller in the whole cluster until released or expired. */
export interface Lease {
  readonly key: string;
  /** Random per grant; only its holder can extend or release the lease. */
  readonly token: string;
  /** Increases with every lease granted on the key, for loaders whose side effects must reject a stale owner. */
  readonly fence: number;
}

/** The outcome of a lease attempt, with what the key held at that moment (saves a second read). */
export interface LeaseAttempt {
  /** The lease, or `undefined` when another caller holds it. */
  readonly lease: Lease | undefined;
  readonly current: StoreRead;
}

/**
 * Wakes a waiting follower when the key is written or its lease is released. Created before the
 * lease attempt, so a fill that lands between the attempt and the wait is not missed.
 */
export interface FillWatch {
  /** Resolves `true` on the next fill/release notification for the key, `false` after `timeoutMs`. */
  next(timeoutMs: number): Promise<boolean>;
  /** Stops watching; frees the timer and the registration. Idempotent. */
  close(): void;
}

export type StoreStatus = 'up' | 'degraded' | 'down';
export type BreakerState = 'closed' | 'open' | 'half-open';

export interface StoreHealth {
  readonly status: StoreStatus;
  readonly breaker: BreakerState;
  /** Why the store is not up (last error), when it is not. */
  readonly reason?: string;
}

export interface SetOptions {
  /**
   * Write, release this lease and wake followers as one atomic step. The write is refused when the
   * key already holds an envelope created after this one.
   */
  readonly lease?: Lease;
}

/**
 * Where envelopes and leases live. herd-guard ships a bounded in-memory store (one process) and a
 * Redis store (a cluster of processes); both pass the same contract tests.
 */
export interface HerdStore {
  /** Short name for logs and metrics (`memory`, `redis`). */
  readonly name: string;
  /** One read; may answer synchronously. Never rejects for a corrupt entry (returns {@link CORRUPT_ENTRY}). */
  get(key: string): StoreRead | Promise<StoreRead>;
  /** Writes the envelope until its `hardExpireAt`. Returns false when refused because a newer envelope exists. */
  set(key: string, entry: Entry, options?: SetOptions): Promise<boolean>;
  delete(key: string): Promise<void>;
  /** Makes the key stale (soft expiry = `now`) without removing it, so the next read revalidates. */
  markStale(key: string, now: number): Promise<boolean>;
  /** Keys written with `tag` that may still exist. */
  keysForTag(tag: string): Promise<string[]>;
  /** Tries to take the fill lease for `key` for `ttlMs`. */
  acquireLease(key: string, ttlMs: number): Promise<LeaseAttempt>;
  /** Extends a lease this caller holds; false when it was lost (expired, taken by another). */
  extendLease(lease: Lease, ttlMs: number): Promise<boolean>;
  /** Releases a lease if this caller still holds it, and wakes followers. */
  releaseLease(lease: Lease): Promise<void>;
  watchFill(key: string): FillWatch;
  health(): StoreHealth;
  /** Closes what the store opened (not clients it was given). */
  close(): Promise<void>;
}
