import type { Entry } from './entry.js';

/**
 * Returned as a snapshot's entry when the key holds something that cannot be decoded. Counted as a
 * miss.
 */
export const CORRUPT_ENTRY: unique symbol = Symbol('herd-guard.corrupt-entry');

/** What a key holds: an envelope, nothing, or something unreadable. */
export type StoreRead = Entry | undefined | typeof CORRUPT_ENTRY;

/**
 * One read of a key: what it holds and its version. The version only ever grows and only the store
 * advances it: on every lease grant, `set()` and invalidation (also of an absent key). A caller
 * that saw version `n` knows that every load started before `n` was granted is outdated.
 */
export interface StoreSnapshot {
  readonly entry: StoreRead;
  readonly version: number;
  /**
   * How the key's last load ended when it stored no value, held in its lease's place (see {@link
   * HerdStore.endLease}), when the store read it with the key (a copy kept in process never says).
   */
  readonly outcome?: LoadOutcome;
}

/**
 * The right to fill one key, held by one caller in the whole cluster until released, expired or
 * revoked.
 */
export interface Lease {
  readonly key: string;
  /** Random per grant; only its holder can extend or release the lease. */
  readonly token: string;
  /**
   * The key's version when the lease was granted. It is the fence of the load: its value is stored
   * only while the key is still at this version (no invalidation, no other grant since).
   */
  readonly fence: number;
  /**
   * How long the lease was granted for (it may be shorter than asked): extend it before this
   * passes.
   */
  readonly ttlMs: number;
}

/** The outcome of a lease attempt, with what the key held at that moment (saves a second read). */
export interface LeaseAttempt {
  /** The lease, or `undefined` when another caller holds it. */
  readonly lease: Lease | undefined;
  /** The key after the attempt: its version is the granted lease's fence when granted. */
  readonly current: StoreSnapshot;
  /** The lease key held foreign data, which the store removed (reported like a corrupt entry). */
  readonly repaired?: boolean;
  /**
   * Not granted: how the key's last load ended, held in its lease's place (see {@link
   * HerdStore.endLease}). Granted: the failures recorded before, when the lease replaced a failure
   * whose retry time had come (`failures` then counts on).
   */
  readonly outcome?: LoadOutcome;
}

/**
 * How a leased load ended when it stored no value, held by the store in the lease's place for a
 * while, so that every process learns it from its next lease attempt:
 * - `pass` (hit-for-miss): the value must not be cached (`doNotCache()`), or the loader answered with
 *   an error that is its caller's answer (a 404). The callers that were waiting for that load take
 *   `entry` (when the value may be shared); everyone else loads without the lease, in parallel,
 *   until the outcome lapses.
 * - `failed`: the loader failed; until the retry time every caller without a servable stale value
 *   gets this failure, and one lease is granted after it (once per cluster per backoff step).
 */
export type LoadOutcome =
  | {
      readonly kind: 'pass';
      /** The fence of the load that ended so. */
      readonly fence: number;
      /** The answer, for the callers that waited for it; `undefined` when it cannot be shared. */
      readonly entry: Entry | undefined;
    }
  | {
      readonly kind: 'failed';
      readonly fence: number;
      /** Consecutive failures of the key's loads, this one included. */
      readonly failures: number;
      readonly failure: SharedFailure;
    };

/**
 * What a load made beside a `pass` outcome (see {@link LoadOutcome}) fills with: a value its loader
 * lets be cached replaces the outcome, if it is still held (of those loads, the first to end wins).
 */
export function passLease(key: string, fence: number): Lease {
  return { key, token: `o.p.${fence}.`, fence, ttlMs: 0 };
}

/** Whether `lease` is a {@link passLease}. */
export function isPassLease(lease: Lease): boolean {
  return lease.token.startsWith('o.p.');
}

/** A loader's failure as every process can read it back. */
export interface SharedFailure {
  /** The error's `name` (`Error`, `LoaderTimeoutError`...). */
  readonly name: string;
  readonly message: string;
  /** A `LoaderTimeoutError`'s limit: the other processes' callers get that error too. */
  readonly timeoutMs?: number;
}

/** What {@link HerdStore.endLease} leaves in a lease's place, and for how long. */
export interface LeaseEnd {
  readonly outcome: LoadOutcome;
  /**
   * How long the outcome is held: a `pass` lapses after this; a `failed` outcome lets the next lease
   * be granted after this (its retry time) and is remembered for `rememberMs` more, so that its
   * failure count carries on.
   */
  readonly holdMs: number;
  readonly rememberMs: number;
}

/** A request for one hedged load: the takeover of a holder deemed stuck (see {@link HerdStore.hedge}). */
export interface HedgeRequest {
  /** Who asks: one id per engine. */
  readonly process: string;
  /** Loads the asking engine runs now. */
  readonly loads: number;
  /** Names the hedge. */
  readonly ticket: string;
  /** The hedge counts against the budget for this long after it is granted. */
  readonly countsForMs: number;
}

export interface AcquireOptions {
  /**
   * Take the lease even though another caller holds it, provided the key is still at this version
   * (compare-and-set: of many callers taking over from the same holder, one wins). The holder's
   * load
   * is then fenced: its value is never stored.
   */
  readonly takeoverFrom?: number;
  /**
   * Why the lease is taken over. `stuck` (a follower that deemed the holder stuck) never takes over a
   * lease that was itself taken over as stuck, so a slow load is replaced at most once; `forced`
   * (`refresh()`) takes over any lease. Default `forced`.
   */
  readonly takeover?: 'stuck' | 'forced';
}

/**
 * How an invalidation leaves the key's value: marked stale (served stale, refreshed once) or
 * removed.
 */
export type InvalidationMode = 'stale' | 'delete';

export interface InvalidationResult {
  /** Whether the key held a value (marked stale or removed). */
  readonly existed: boolean;
  /** The key's new version. */
  readonly version: number;
}

/**
 * Wakes a waiting follower when the key is written, invalidated or its lease is released. Created
 * before the lease attempt, so a fill that lands between the attempt and the wait is not missed.
 * A notification is a hint: a follower also re-checks the store on its own.
 */
export interface FillWatch {
  /** Resolves `true` on the next notification for the key, `false` after `timeoutMs`. */
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
  /**
   * What is wrong with the store's setup though it works, e.g. a Redis that may evict the indexes
   * invalidation depends on. Absent when there is nothing to say.
   */
  readonly warnings?: readonly string[];
}

/**
 * How long a store keeps the time of an index's last invalidation (see
 * {@link HerdStore.invalidatedWithin}): a load that ran longer is told the index may have been
 * invalidated while it ran.
 */
export const INVALIDATIONS_KEPT_MS = 5 * 60_000;

/**
 * A set of keys kept by the store: the keys stored with a tag, or the keys derived from an input
 * key.
 */
export type KeyIndex = { readonly tag: string } | { readonly inputOf: string };

/**
 * Where envelopes, versions and leases live: core defines this port, and the memory and Redis
 * stores implement it (both pass the same contract tests). The order of a key's writes, the lease
 * ownership check and the fence are decided here, atomically; the engine only reads the verdicts.
 * See docs/invalidation.md and docs/redis.md.
 */
export interface HerdStore {
  /** Short name for logs and metrics (`memory`, `redis`). */
  readonly name: string;
  /**
   * One read; may answer synchronously. Never rejects for a corrupt entry (its entry is {@link
   * CORRUPT_ENTRY}).
   */
  get(key: string): StoreSnapshot | Promise<StoreSnapshot>;
  /**
   * One read answered by the store itself: never by a copy kept in this process (a near cache,
   * which may lag behind other processes' writes), and rejecting rather than falling back to one
   * when the store cannot answer. The reads a derived value is built from go here. A store that
   * keeps no copies need not implement it (`get` is used).
   */
  getAtStore?(key: string): StoreSnapshot | Promise<StoreSnapshot>;
  /**
   * Stores a value loaded under `lease` (`entry.version` is `lease.fence`) unless fenced, releases
   * the lease and wakes followers, in one step; `false` when fenced. A `stuck` takeover of `lease`
   * does not fence it (the slow holder's value is as good as its rescuer's): it is stored under the
   * key's current version. Without a lease nothing shared is written (`false`; a store may keep
   * the value for this process alone). A {@link passLease} stores only while the `pass` outcome of
   * its fence is held, and the first such fill ends it.
   */
  fill(key: string, entry: Entry, lease: Lease | undefined): Promise<boolean>;
  /**
   * Writes `entry` whatever the key held (write-through): advances the version, revokes any lease
   * and wakes followers; resolves the new version. Kept for `lifetimeLeftMs(entry)`, so no store
   * compares its clock with the writer's.
   */
  set(key: string, entry: Entry): Promise<number>;
  /** Advances the version, revokes any lease, marks the value stale or removes it, and notifies. */
  invalidate(key: string, mode: InvalidationMode): Promise<InvalidationResult>;
  /**
   * Invalidates every key of the store's namespace at once, as {@link invalidate} would each
   * (`stale` or `delete`), without listing them: the store records the clear in one step and
   * applies it to each key at that key's next touch (read, lease, fill, write), atomically with it.
   * Loads running when it lands are fenced, copies kept by other processes follow its
   * notification. A store that cannot do this leaves it out (`clear()` then rejects).
   */
  clear?(mode: InvalidationMode): Promise<void>;
  /**
   * Records `key` in `index` for `ttlMs` (counted on the store's clock), or longer if already
   * there.
   */
  addToIndex(index: KeyIndex, key: string, ttlMs: number): Promise<void>;
  /**
   * The keys recorded in `index` that may still exist, read to invalidate them: the store notes
   * when, for {@link invalidatedWithin}.
   */
  indexMembers(index: KeyIndex): Promise<string[]>;
  /**
   * Whether `index` was invalidated ({@link indexMembers}) within the last `withinMs`, counted on
   * the store's clock, or may have been (a store answers `true` when it cannot tell, e.g. for a
   * time longer than it keeps, or a clock it cannot compare closely). A load that records its key
   * in an index only once it has loaded (a tag its loader chose) asks this after recording it, for
   * how long it ran: an invalidation it missed then fences it. A store that leaves it out leaves
   * such loads unfenced.
   */
  invalidatedWithin?(index: KeyIndex, withinMs: number): Promise<boolean>;
  /** Tries to take the fill lease for `key` for `ttlMs`. */
  acquireLease(key: string, ttlMs: number, options?: AcquireOptions): Promise<LeaseAttempt>;
  /**
   * Extends a lease this caller holds; false when it was lost (expired, revoked, taken by another).
   */
  extendLease(lease: Lease, ttlMs: number): Promise<boolean>;
  /** Releases a lease if this caller still holds it, and wakes followers. */
  releaseLease(lease: Lease): Promise<void>;
  /**
   * Replaces a lease this caller still holds, at its fence, with how its load ended (see {@link
   * LoadOutcome}), held for `end.holdMs`, and wakes followers; `false` when the lease was lost
   * (nothing is written). An invalidation, a `set()` or a forced takeover ends the outcome, as it
   * would a lease; a `stuck` takeover never replaces one.
   */
  endLease(lease: Lease, end: LeaseEnd): Promise<boolean>;
  /**
   * Grants a hedged load while the hedges granted in the cluster in the last `countsForMs` are
   * fewer than `hedgesAllowed()` of the loads the asking engines reported in the last
   * `HEDGE_REPORT_MS` (lib/core/hedge-budget.ts): when the whole backend is slow, the budget is
   * spent at once and nobody doubles its load. A store without it is given an engine-local budget.
   */
  hedge?(request: HedgeRequest): Promise<boolean>;
  watchFill(key: string): FillWatch;
  health(): StoreHealth;
  /**
   * Calls `listener` with each warning about the store's setup found from now on (see {@link
   * StoreHealth.warnings}), and at once with those already found; returns the unsubscribe.
   */
  onWarning?(listener: (warning: string) => void): () => void;
  /** Closes what the store opened (not clients it was given). */
  close(): Promise<void>;
}
