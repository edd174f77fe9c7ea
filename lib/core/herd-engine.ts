import { ClosedError } from '../errors/closed.error.js';
import { ConfigurationError } from '../errors/configuration.error.js';
import { HerdGuardError } from '../errors/herd-guard.error.js';
import { InvalidKeyError } from '../errors/invalid-key.error.js';
import { LoaderFailedError } from '../errors/loader-failed.error.js';
import { LoaderTimeoutError } from '../errors/loader-timeout.error.js';
import { SerializationError } from '../errors/serialization.error.js';
import { StoreError } from '../errors/store.error.js';
import { UpstreamUnavailableError } from '../errors/upstream-unavailable.error.js';
import { WaitAbortedError } from '../errors/wait-aborted.error.js';
import { WaitTimeoutError } from '../errors/wait-timeout.error.js';
import { MemoryStore } from '../stores/memory/memory.store.js';
import {
  CORRUPT_ENTRY,
  type FillWatch,
  type HerdStore,
  type Lease,
  type StoreRead,
} from '../stores/herd-store.interface.js';
import { Backoff } from './backoff.js';
import { type Duration, parseDuration } from './duration.js';
import { type Entry, isFresh, isNegative, isServable } from './entry.js';
import type { HerdEvent, HerdEventListener, ReadPath } from './events.js';
import { type CachePolicy, type ResolvedPolicy, expiryFor, resolvePolicy, shouldRefreshEarly } from './policy.js';
import { SingleFlight } from './single-flight.js';
import { EngineStats, type StatsSnapshot } from './stats.js';

/** What a loader receives. */
export interface LoadContext<T = unknown> {
  readonly key: string;
  /** Fires when the loader passes `loaderHardTimeout` or the cache shuts down. */
  readonly signal: AbortSignal;
  /**
   * Fencing number of the lease this load holds: it increases with every lease granted on the key,
   * so a side effect can reject a writer that lost its lease. `undefined` when loading without a
   * lease (store unreachable, or `onWaitTimeout: 'load'`).
   */
  readonly fence: number | undefined;
  /** The stale value being refreshed, when there is one. */
  readonly stale: T | undefined;
}

/** Loads the value of a key from the backend. Return `null` or `undefined` for "not found". */
export type Loader<T> = (context: LoadContext<T>) => T | Promise<T>;

export interface ReadOptions {
  /** Overrides the default policy for this call (merged field by field). */
  readonly policy?: CachePolicy;
  /** Tags stored with a loaded value, for group invalidation. */
  readonly tags?: readonly string[];
  /** Stop waiting when this fires; the shared load goes on for other callers. */
  readonly signal?: AbortSignal;
  /** Stop waiting after this long; a servable stale value is returned if there is one. */
  readonly timeout?: Duration;
}

/** The answer to one read, with the entry's timing (for `Age` and `Cache-Control`). */
export interface ReadResult<T> {
  readonly value: T;
  readonly path: ReadPath;
  /** A cached "not found". */
  readonly negative: boolean;
  readonly createdAt: number;
  readonly softExpireAt: number;
  readonly hardExpireAt: number;
  /**
   * On a stale read: settles when the background refresh ends, with the new value, or `undefined`
   * when no newer value was written (refresh failed, backing off, or refreshed elsewhere). Never rejects.
   */
  readonly revalidated?: Promise<ReadResult<T> | undefined>;
}

export interface HerdEngineOptions {
  /** Where entries and leases live. Default: a new {@link MemoryStore}. */
  readonly store?: HerdStore;
  /** Default policy for every call. */
  readonly policy?: CachePolicy;
  /** Clock (epoch ms). Replace only in tests of TTL arithmetic. */
  readonly now?: () => number;
  /** Random source in [0, 1) for jitter, backoff and early refresh. */
  readonly random?: () => number;
}

/** Counts of what is in progress; all zero when the engine is idle. */
export interface EngineActivity {
  /** Keys with a load (or a wait for another process's load) in progress. */
  readonly inflight: number;
  /** Callers waiting with their own timeout or signal armed. */
  readonly armedWaits: number;
  /** Loaders currently running. */
  readonly loaders: number;
  /** Lease releases and other store writes not yet acknowledged. */
  readonly pendingStoreOps: number;
}

/** What a fill produced: an entry, and whether it comes from this load (then it is served even if already expired). */
interface Fill {
  readonly entry: Entry;
  readonly loaded: boolean;
}

interface FillRequest<T> {
  readonly key: string;
  readonly loader: Loader<T>;
  readonly policy: ResolvedPolicy;
  /** The servable value this fill refreshes, if any. */
  readonly stale: Entry | undefined;
  readonly tags: readonly string[] | undefined;
  /** Load even when the store already holds a fresh value (warming). */
  readonly force: boolean;
  readonly background: boolean;
}

/** One store read and its routing, shared by the callers of a key that arrive while it is out. */
interface SharedRead {
  /** Callers that joined after the first. Written by `#read` while the read is in the map only. */
  joiners: number;
  readonly options: ReadOptions | undefined;
  /** The first caller's answer, which every joiner receives. Written once, right after creation. */
  promise: Promise<unknown>;
}

type LeaseOutcome =
  | { readonly kind: 'owner'; readonly lease: Lease; readonly current: Entry | undefined }
  | { readonly kind: 'contended'; readonly current: Entry | undefined }
  | { readonly kind: 'unreachable' };

const NO_REVALIDATION: Promise<undefined> = Promise.resolve(undefined);

/**
 * The read path: fresh hit, stale hit with one background refresh, and a coalesced, leased load
 * on a miss. Framework-free; the NestJS service wraps one engine.
 */
export class HerdEngine {
  readonly store: HerdStore;
  readonly #defaults: ResolvedPolicy;
  readonly #defaultInput: CachePolicy | undefined;
  /** Per-call policies resolved once per policy object (decorators pass the same object every call). */
  readonly #policies = new WeakMap<CachePolicy, ResolvedPolicy>();
  readonly #flights = new SingleFlight();
  /** Store reads still out per key, joined by callers with the same options; removed when the read returns. */
  readonly #sharedReads = new Map<string, SharedRead>();
  /** The outcome of the refresh in flight per key, shared by its stale callers; removed when it settles. */
  readonly #revalidations = new Map<string, Promise<ReadResult<unknown> | undefined>>();
  readonly #backoff: Backoff;
  readonly #now: () => number;
  readonly #random: () => number;
  readonly #stats = new EngineStats();
  readonly #listeners: HerdEventListener[] = [];
  /** Set once by `close()`. */
  #closed = false;
  /** Store writes started without awaiting them (lease release/hold); `close()` waits for them. */
  readonly #pendingOps = new Set<Promise<unknown>>();
  /** Fill watches of followers; `close()` ends their waits. Added and removed by `#fill` only. */
  readonly #watches = new Set<FillWatch>();
  /** One per running loader; `close()` aborts them. Added and removed by `#runLoader` only. */
  readonly #loaders = new Map<AbortController, string>();

  constructor(options: HerdEngineOptions = {}) {
    this.store = options.store ?? new MemoryStore();
    this.#defaultInput = options.policy;
    this.#defaults = resolvePolicy(options.policy);
    this.#now = options.now ?? Date.now;
    this.#random = options.random ?? Math.random;
    this.#backoff = new Backoff(this.#random);
  }

  /** The default policy, resolved to milliseconds. */
  get defaults(): ResolvedPolicy {
    return this.#defaults;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Returns the value of `key`, loading it with `loader` at most once across all concurrent callers. */
  getOrLoad<T>(key: string, loader: Loader<T>, options?: ReadOptions): Promise<T> {
    return this.#read(key, loader, options, false) as Promise<T>;
  }

  /** Like {@link getOrLoad}, with how the read was answered and the entry's timing. */
  read<T>(key: string, loader: Loader<T>, options?: ReadOptions): Promise<ReadResult<T>> {
    return this.#read(key, loader, options, true) as Promise<ReadResult<T>>;
  }

  /** The servable value of `key` without loading: `undefined` when absent or past hard expiry. */
  async peek<T>(key: string): Promise<ReadResult<T> | undefined> {
    this.#assertOpen(key);
    const entry = this.#decoded(key, await this.#storeGet(key)) as Entry<T> | undefined;
    if (entry === undefined || !isServable(entry, this.#now())) return undefined;
    return toResult(entry, isFresh(entry, this.#now()) ? 'fresh' : 'stale');
  }

  /**
   * Stores `value` as freshly loaded (a write-through after an update). `null`/`undefined` store
   * "not found". Resolves `false` when the store kept a newer value (written by a process whose clock
   * is ahead); loads that started before this call never overwrite it.
   */
  async set<T>(key: string, value: T, options: Pick<ReadOptions, 'policy' | 'tags'> = {}): Promise<boolean> {
    this.#assertOpen(key);
    const policy = this.policyFor(options.policy);
    const entry = this.#entryFor(value, policy, this.#now(), options.tags);
    return this.store.set(key, entry);
  }

  /** Marks `key` stale: the next read is served stale and refreshes once in the background (no herd). */
  async expire(key: string): Promise<boolean> {
    this.#assertOpen(key);
    this.#backoff.recordSuccess(key);
    return this.store.markStale(key, this.#now());
  }

  /** Removes `key`; the next read is a miss (coalesced and leased, but it waits for the loader). */
  async delete(key: string): Promise<void> {
    this.#assertOpen(key);
    this.#backoff.recordSuccess(key);
    await this.store.delete(key);
  }

  /** Marks every key stored with `tag` stale. Returns how many were marked. */
  async expireTag(tag: string): Promise<number> {
    const keys = await this.#keysForTag(tag);
    const marked = await Promise.all(keys.map((key) => this.expire(key)));
    return marked.filter(Boolean).length;
  }

  /** Deletes every key stored with `tag`. Returns how many keys were tagged. */
  async deleteTag(tag: string): Promise<number> {
    const keys = await this.#keysForTag(tag);
    await Promise.all(keys.map((key) => this.delete(key)));
    return keys.length;
  }

  /**
   * Loads `key` now even if a fresh value is cached (warming, prefetch), still coalesced and leased:
   * when another process holds the lease, its fill is awaited instead.
   */
  async refresh<T>(
    key: string,
    loader: Loader<T>,
    options: Pick<ReadOptions, 'policy' | 'tags'> = {},
  ): Promise<ReadResult<T>> {
    this.#assertOpen(key);
    assertLoader(loader);
    const policy = this.policyFor(options.policy);
    const stale = this.#decoded(key, await this.#storeGet(key));
    const servable = stale !== undefined && isServable(stale, this.#now()) ? stale : undefined;
    const request: FillRequest<T> = {
      key,
      loader,
      policy,
      stale: servable,
      tags: options.tags,
      force: true,
      background: false,
    };
    const { value: fill } = await this.#flights.do(key, () => this.#fill(request));
    return toResult(fill.entry as Entry<T>, 'miss');
  }

  /** Resolves a per-call policy over the defaults (cached per policy object). Throws ConfigurationError. */
  policyFor(policy: CachePolicy | undefined): ResolvedPolicy {
    if (policy === undefined) return this.#defaults;
    let resolved = this.#policies.get(policy);
    if (resolved === undefined) {
      resolved = resolvePolicy(policy, this.#defaultInput);
      this.#policies.set(policy, resolved);
    }
    return resolved;
  }

  /** Subscribes to engine events (metrics, logs). Returns the unsubscribe function. */
  onEvent(listener: HerdEventListener): () => void {
    this.#listeners.push(listener);
    return () => {
      const index = this.#listeners.indexOf(listener);
      if (index >= 0) this.#listeners.splice(index, 1);
    };
  }

  /** Counters since start. */
  stats(): StatsSnapshot {
    return this.#stats.snapshot(this.#flights.size);
  }

  activity(): EngineActivity {
    return {
      inflight: this.#flights.size,
      armedWaits: this.#flights.armedWaits,
      loaders: this.#loaders.size,
      pendingStoreOps: this.#pendingOps.size,
    };
  }

  /** Aborts running loaders, waits for pending lease releases, refuses new reads. Does not close the store. */
  async close(): Promise<void> {
    if (!this.closed) {
      this.#closed = true;
      for (const [loader, key] of this.#loaders) loader.abort(new ClosedError(key));
      // Followers stop waiting (their fill loop then sees the engine closed and rejects).
      for (const watch of this.#watches) watch.close();
    }
    await Promise.allSettled([...this.#pendingOps]);
  }

  // --- the read path -------------------------------------------------------------------------

  /**
   * One read: the store's answer is routed once per caller. With `full`, callers get a
   * {@link ReadResult}; without, only the value (no result object per caller on the hot path).
   */
  #read<T>(
    key: string,
    loader: Loader<T>,
    options: ReadOptions | undefined,
    full: boolean,
  ): Promise<T | ReadResult<T>> {
    let policy: ResolvedPolicy;
    try {
      this.#assertOpen(key);
      assertLoader(loader);
      policy = this.policyFor(options?.policy);
      if (options?.timeout !== undefined) parseDuration(options.timeout, 'timeout');
    } catch (error) {
      return Promise.reject(error);
    }
    if (!full) {
      // Callers of a key with the same options share a store read still out (and its routing).
      const shared = this.#sharedReads.get(key);
      if (shared !== undefined && shared.options === options) {
        shared.joiners += 1;
        return shared.promise as Promise<T>;
      }
    }
    const startedAt = this.#listeners.length > 0 ? performance.now() : 0;
    let found: StoreRead | Promise<StoreRead>;
    try {
      found = this.store.get(key);
    } catch (error) {
      found = Promise.reject(error);
    }
    if (!(found instanceof Promise)) {
      return Promise.resolve(this.#route(key, found, loader, policy, options, startedAt, full, undefined));
    }
    const shared: SharedRead | undefined = full ? undefined : { joiners: 0, options, promise: NO_REVALIDATION };
    const routed = found.then(
      (read) => {
        this.#unshare(key, shared);
        return this.#route(key, read, loader, policy, options, startedAt, full, shared);
      },
      (error: unknown) => {
        this.#unshare(key, shared);
        return this.#route(key, this.#storeReadFailed(key, error), loader, policy, options, startedAt, full, shared);
      },
    );
    if (shared !== undefined) {
      shared.promise = routed;
      this.#sharedReads.set(key, shared);
    }
    return routed;
  }

  /** The store read came back: later callers start their own (they must see writes made since). */
  #unshare(key: string, shared: SharedRead | undefined): void {
    if (shared !== undefined && this.#sharedReads.get(key) === shared) this.#sharedReads.delete(key);
  }

  /** Chooses the path for what the store returned. */
  #route<T>(
    key: string,
    found: StoreRead,
    loader: Loader<T>,
    policy: ResolvedPolicy,
    options: ReadOptions | undefined,
    startedAt: number,
    full: boolean,
    shared: SharedRead | undefined,
  ): T | ReadResult<T> | Promise<T | ReadResult<T>> {
    const entry = this.#decoded(key, found) as Entry<T> | undefined;
    const now = this.#now();
    if (entry !== undefined && isFresh(entry, now)) {
      if (this.#shouldRefreshEarly(entry, policy, now)) this.#startRefresh(key, loader, policy, entry, options?.tags);
      return this.#answer(key, entry, 'fresh', startedAt, full, shared);
    }
    if (entry !== undefined && isServable(entry, now) && policy.staleWhileRevalidate) {
      if (!full) {
        this.#startRefresh(key, loader, policy, entry, options?.tags);
        return this.#answer(key, entry, 'stale', startedAt, false, shared);
      }
      const revalidated = this.#revalidation(key, loader, policy, entry, options?.tags);
      return this.#answer(key, entry, 'stale', startedAt, true, undefined, revalidated);
    }
    const stale = entry !== undefined && isServable(entry, now) ? entry : undefined;
    return this.#loadForCaller(key, loader, policy, options, stale, startedAt, full, shared);
  }

  /** Starts one background refresh of a stale key, unless one runs already or the key is backing off. */
  #startRefresh<T>(
    key: string,
    loader: Loader<T>,
    policy: ResolvedPolicy,
    stale: Entry<T>,
    tags: readonly string[] | undefined,
  ): void {
    if (this.#flights.has(key) || this.#backoff.isBackingOff(key, this.#now())) return;
    const request: FillRequest<T> = { key, loader, policy, stale, tags, force: false, background: true };
    this.#flights.run(key, () => this.#fill(request)).catch(ignore);
  }

  /**
   * {@link #startRefresh} for callers that want to know how it ends: one promise per refresh, shared
   * by every stale caller of the key, settling with the new result or `undefined`. Never rejects.
   */
  #revalidation<T>(
    key: string,
    loader: Loader<T>,
    policy: ResolvedPolicy,
    stale: Entry<T>,
    tags: readonly string[] | undefined,
  ): Promise<ReadResult<T> | undefined> {
    const pending = this.#revalidations.get(key) as Promise<ReadResult<T> | undefined> | undefined;
    if (pending !== undefined) return pending;
    if (this.#backoff.isBackingOff(key, this.#now())) return NO_REVALIDATION;
    const request: FillRequest<T> = { key, loader, policy, stale, tags, force: false, background: true };
    const revalidated = this.#flights
      .run(key, () => this.#fill(request))
      .then(
        (fill) => (fill.loaded || isNewer(fill.entry, stale) ? toResult(fill.entry as Entry<T>, 'miss') : undefined),
        () => undefined,
      );
    this.#revalidations.set(key, revalidated);
    void revalidated.then(() => {
      if (this.#revalidations.get(key) === revalidated) this.#revalidations.delete(key);
    });
    return revalidated;
  }

  /** A caller with nothing it may be given at once: join or start the load, bounded by its own limits. */
  #loadForCaller<T>(
    key: string,
    loader: Loader<T>,
    policy: ResolvedPolicy,
    options: ReadOptions | undefined,
    stale: Entry<T> | undefined,
    startedAt: number,
    full: boolean,
    shared: SharedRead | undefined,
  ): Promise<T | ReadResult<T>> {
    // This caller and those sharing its read join a load already running; or only they join this one.
    const joined = (this.#flights.has(key) ? 1 : 0) + (shared?.joiners ?? 0);
    for (let i = 0; i < joined; i += 1) this.#emit({ type: 'coalesced', key });
    const tags = options?.tags;
    const start = (): Promise<Fill> =>
      this.#fill({ key, loader, policy, stale, tags, force: false, background: false });
    const timeoutMs = this.#callerTimeoutMs(options, policy, stale);
    const limits =
      options?.signal === undefined && timeoutMs === undefined ? undefined : { signal: options?.signal, timeoutMs };
    return this.#flights.run(key, start, limits).then(
      (fill) => {
        const now = this.#now();
        if (fill.loaded) return this.#answer(key, fill.entry as Entry<T>, 'miss', startedAt, full, shared);
        // A joined refresh may hand back a value that expired while it ran: never serve it.
        if (!isServable(fill.entry, now)) {
          if (stale !== undefined && isServable(stale, now))
            return this.#answer(key, stale, 'stale', startedAt, full, shared);
          throw new UpstreamUnavailableError(key, 0);
        }
        const path: ReadPath = !isFresh(fill.entry, now) ? 'stale' : fill.entry === stale ? 'fresh' : 'miss';
        return this.#answer(key, fill.entry as Entry<T>, path, startedAt, full, shared);
      },
      (error: unknown) => {
        if (stale !== undefined && !(error instanceof WaitAbortedError) && isServable(stale, this.#now())) {
          // Waited longer than loaderSoftTimeout (or its own timeout), or the shared load failed.
          const reason = staleReason(error);
          this.#emit({ type: 'stale-on-error', key, reason });
          return this.#answer(key, stale, 'stale', startedAt, full, shared);
        }
        throw error;
      },
    );
  }

  /**
   * One fill of a key, run once per process at a time (inside the single flight): take the lease
   * and load, or serve what is servable, or wait for the owner's fill.
   */
  async #fill<T>(request: FillRequest<T>): Promise<Fill> {
    const { key, policy } = request;
    // Watch before the lease attempt, so a fill landing in between is not missed.
    const watch = this.store.watchFill(key);
    this.#watches.add(watch);
    try {
      const waitStartedAt = this.#now();
      const deadline = waitStartedAt + policy.waitTimeoutMs;
      let waiting = false;
      for (;;) {
        // A fill still running when the engine closed must not start a load (or take a lease).
        if (this.closed) throw new ClosedError(key);
        const outcome = await this.#tryLease(key, policy);
        // Check: nothing to coordinate with, so load here (coalesced in this process only).
        if (outcome.kind === 'unreachable') return await this.#loadAsOwner(request, undefined, undefined);
        // Lock: this caller owns the fill.
        if (outcome.kind === 'owner') return await this.#loadAsOwner(request, outcome.lease, outcome.current);
        // Contended: someone else loads. Serve the newest servable value if there is one.
        this.#emit({ type: 'lease-contended', key });
        const servable = newestServable(request.stale, outcome.current, this.#now());
        if (servable !== undefined && (!request.force || isNewer(servable, request.stale))) {
          return { entry: servable, loaded: false };
        }
        if (!waiting) this.#emit({ type: 'wait', key });
        waiting = true;
        const remainingMs = deadline - this.#now();
        if (remainingMs <= 0) return await this.#onWaitTimeout(request, this.#now() - waitStartedAt);
        // Wait for the owner's notification, at most one lease TTL: an owner that died sends none.
        if (await watch.next(Math.min(remainingMs, policy.leaseTtlMs))) {
          const filled = this.#decoded(key, await this.#storeGet(key));
          if (
            filled !== undefined &&
            isServable(filled, this.#now()) &&
            (!request.force || isNewer(filled, request.stale))
          ) {
            return { entry: filled, loaded: false };
          }
        }
        // Try for the lease again: the owner failed, gave up, or died and its lease expired.
      }
    } finally {
      watch.close();
      this.#watches.delete(watch);
    }
  }

  /**
   * Loads as the lease owner (or without a lease when the store is unreachable), writes the entry,
   * releases the lease and wakes followers. The lease is released or held for the backoff in the
   * one `finally` below.
   */
  async #loadAsOwner<T>(request: FillRequest<T>, lease: Lease | undefined, current: Entry | undefined): Promise<Fill> {
    const { key, policy } = request;
    // The fail-safe value: what this caller had, or what the store held when the lease was taken.
    const stale = newestServable(request.stale, current, this.#now());
    let leaseSettled = false;
    let holdLeaseMs = 0;
    const keepAlive = lease === undefined ? undefined : this.#keepLeaseAlive(lease, policy);
    try {
      if (lease !== undefined) this.#emit({ type: 'lease-acquired', key, fence: lease.fence });
      // Re-check: another process may have refreshed the key between our read and our lease.
      if (!request.force && current !== undefined && isFresh(current, this.#now()) && isNewer(current, request.stale)) {
        return { entry: current, loaded: false };
      }
      // Load.
      const loadStartedAt = this.#now();
      let value: T;
      try {
        value = await this.#runLoader({ ...request, stale }, lease);
      } catch (error) {
        this.#emit({
          type: 'load-failed',
          key,
          durationMs: this.#now() - loadStartedAt,
          background: request.background,
          error,
        });
        // On error: serve stale (fail-safe) and back off, or throw.
        const now = this.#now();
        if (stale !== undefined && isServable(stale, now)) {
          const { delayMs, failures } = this.#backoff.recordFailure(key, now, {
            initialMs: policy.backoffInitialMs,
            maxMs: policy.backoffMaxMs,
          });
          this.#emit({ type: 'backoff', key, delayMs, failures });
          this.#emit({
            type: 'stale-on-error',
            key,
            reason: error instanceof LoaderTimeoutError ? 'loader-timeout' : 'loader-failed',
          });
          // Keeping the lease for the backoff makes every process serve stale instead of retrying.
          holdLeaseMs = Math.min(delayMs, stale.hardExpireAt - now);
          return { entry: stale, loaded: false };
        }
        throw error instanceof HerdGuardError ? error : new LoaderFailedError(key, error);
      }
      const entry = this.#entryFor(value, policy, loadStartedAt, request.tags);
      this.#backoff.recordSuccess(key);
      // Write, release and notify in one store step.
      if (!isNegative(entry) || policy.negativeTtlMs > 0) {
        try {
          await this.store.set(key, entry, { lease });
          leaseSettled = true;
        } catch (error) {
          if (error instanceof SerializationError) throw error;
          this.#emit({ type: 'store-error', operation: 'set', key, error });
        }
      }
      this.#emit({
        type: 'load-ok',
        key,
        durationMs: entry.loadMs,
        background: request.background,
        negative: isNegative(entry),
      });
      return { entry, loaded: true };
    } finally {
      keepAlive?.stop();
      if (lease !== undefined && !leaseSettled) {
        this.#track(
          holdLeaseMs > 0 ? this.store.extendLease(lease, holdLeaseMs) : this.store.releaseLease(lease),
          'release-lease',
          key,
        );
      }
    }
  }

  /** Runs the loader with its context; rejects with LoaderTimeoutError after `loaderHardTimeout`. */
  #runLoader<T>(request: FillRequest<T>, lease: Lease | undefined): Promise<T> {
    const { key, loader, policy, stale } = request;
    if (this.closed) return Promise.reject(new ClosedError(key));
    const controller = new AbortController();
    this.#loaders.set(controller, key);
    const timeoutMs = policy.loaderHardTimeoutMs;
    const timer =
      timeoutMs === undefined
        ? undefined
        : setTimeout(() => controller.abort(new LoaderTimeoutError(key, timeoutMs)), timeoutMs);
    const context: LoadContext<T> = {
      key,
      signal: controller.signal,
      fence: lease?.fence,
      stale: stale?.value as T | undefined,
    };
    const aborted = new Promise<never>((_, reject) => {
      controller.signal.addEventListener('abort', () => reject(controller.signal.reason), { once: true });
    });
    // A loader that ignores its signal is abandoned, not awaited.
    return Promise.race([Promise.resolve().then(() => loader(context)), aborted]).finally(() => {
      if (timer !== undefined) clearTimeout(timer);
      this.#loaders.delete(controller);
    });
  }

  /** Nobody filled the key within `waitTimeout`: apply `onWaitTimeout`. */
  async #onWaitTimeout<T>(request: FillRequest<T>, waitedMs: number): Promise<Fill> {
    this.#emit({ type: 'wait-timeout', key: request.key, waitedMs });
    if (request.policy.onWaitTimeout === 'load') return this.#loadAsOwner(request, undefined, undefined);
    throw new UpstreamUnavailableError(request.key, waitedMs);
  }

  async #tryLease(key: string, policy: ResolvedPolicy): Promise<LeaseOutcome> {
    try {
      const { lease, current } = await this.store.acquireLease(key, policy.leaseTtlMs);
      const entry = this.#decoded(key, current);
      return lease === undefined ? { kind: 'contended', current: entry } : { kind: 'owner', lease, current: entry };
    } catch (error) {
      this.#emit({ type: 'store-error', operation: 'acquire-lease', key, error });
      return { kind: 'unreachable' };
    }
  }

  /** Extends the lease while the loader runs, so a slow load does not let a second loader in. */
  #keepLeaseAlive(lease: Lease, policy: ResolvedPolicy): { stop(): void } {
    const timer = setInterval(
      () => {
        this.store.extendLease(lease, policy.leaseTtlMs).then(
          (kept) => {
            if (kept) return;
            clearInterval(timer);
            this.#emit({ type: 'lease-lost', key: lease.key });
          },
          (error: unknown) => this.#emit({ type: 'store-error', operation: 'extend-lease', key: lease.key, error }),
        );
      },
      Math.max(1, Math.floor(policy.leaseTtlMs / 3)),
    );
    return { stop: () => clearInterval(timer) };
  }

  // --- helpers -------------------------------------------------------------------------------

  #entryFor<T>(value: T, policy: ResolvedPolicy, loadStartedAt: number, tags: readonly string[] | undefined): Entry<T> {
    const now = this.#now();
    const negative = value === null || value === undefined;
    // Stamped with the load's start: the data is at least that old, so a write or an invalidation
    // made while the loader ran is newer than this value and is never overwritten by it. TTLs count
    // from there too.
    const createdAt = Math.min(loadStartedAt, now);
    const { softExpireAt, hardExpireAt } = expiryFor(policy, createdAt, negative, this.#random);
    const entry: Entry<T> = {
      value,
      createdAt,
      softExpireAt,
      hardExpireAt,
      loadMs: Math.max(0, now - loadStartedAt),
    };
    return tags === undefined || tags.length === 0 ? entry : { ...entry, tags: [...tags] };
  }

  #shouldRefreshEarly(entry: Entry, policy: ResolvedPolicy, now: number): boolean {
    return (
      policy.earlyRefreshBeta > 0 && shouldRefreshEarly(policy, entry.softExpireAt, entry.loadMs, now, this.#random)
    );
  }

  #callerTimeoutMs(
    options: ReadOptions | undefined,
    policy: ResolvedPolicy,
    stale: Entry | undefined,
  ): number | undefined {
    const own = options?.timeout === undefined ? undefined : parseDuration(options.timeout, 'timeout');
    const soft = stale === undefined ? undefined : policy.loaderSoftTimeoutMs;
    if (own === undefined) return soft;
    return soft === undefined ? own : Math.min(own, soft);
  }

  /** Counts and reports the read (for every caller sharing it), and gives the caller its answer. */
  #answer<T>(
    key: string,
    entry: Entry<T>,
    path: ReadPath,
    startedAt: number,
    full: boolean,
    shared?: SharedRead,
    revalidated?: Promise<ReadResult<T> | undefined>,
  ): T | ReadResult<T> {
    const negative = isNegative(entry);
    const callers = 1 + (shared?.joiners ?? 0);
    this.#stats.countRead(path, negative, callers);
    if (this.#listeners.length > 0) {
      const durationMs = startedAt === 0 ? 0 : performance.now() - startedAt;
      for (let i = 0; i < callers; i += 1) this.#emit({ type: 'read', key, path, negative, durationMs });
    }
    return full ? toResult(entry, path, revalidated) : entry.value;
  }

  /** Reads the store; a failing store is reported and read as a miss (the caller then loads). */
  #storeGet(key: string): StoreRead | Promise<StoreRead> {
    try {
      const found = this.store.get(key);
      return found instanceof Promise ? found.catch((error: unknown) => this.#storeReadFailed(key, error)) : found;
    } catch (error) {
      return this.#storeReadFailed(key, error);
    }
  }

  #storeReadFailed(key: string, error: unknown): undefined {
    this.#emit({ type: 'store-error', operation: 'get', key, error });
    return undefined;
  }

  #decoded(key: string, found: StoreRead): Entry | undefined {
    if (found !== CORRUPT_ENTRY) return found;
    this.#emit({ type: 'corrupt-entry', key });
    return undefined;
  }

  async #keysForTag(tag: string): Promise<string[]> {
    if (typeof tag !== 'string' || tag.length === 0)
      throw new ConfigurationError('tag', 'a tag must be a non-empty string');
    return this.store.keysForTag(tag);
  }

  /** Runs a store operation nobody awaits; reports its failure and lets `close()` wait for it. */
  #track(operation: Promise<unknown>, name: string, key: string): void {
    const tracked = operation.then(
      () => undefined,
      (error: unknown) => this.#emit({ type: 'store-error', operation: name, key, error }),
    );
    this.#pendingOps.add(tracked);
    void tracked.then(() => this.#pendingOps.delete(tracked));
  }

  #emit(event: HerdEvent): void {
    this.#stats.count(event);
    for (const listener of this.#listeners) {
      try {
        listener(event);
      } catch {
        // A listener's failure must not break the read path.
      }
    }
  }

  #assertOpen(key: unknown): asserts key is string {
    if (typeof key !== 'string' || key.length === 0) throw new InvalidKeyError(key);
    if (this.closed) throw new ClosedError(key);
  }
}

function assertLoader(loader: unknown): void {
  if (typeof loader !== 'function')
    throw new ConfigurationError('loader', `expected a function, received ${typeof loader}`);
}

/** Why a caller that had a stale value in hand gets it instead of an error. */
function staleReason(error: unknown): 'loader-failed' | 'loader-timeout' | 'wait-timeout' | 'store-down' {
  if (error instanceof LoaderTimeoutError || error instanceof WaitTimeoutError) return 'loader-timeout';
  if (error instanceof UpstreamUnavailableError) return 'wait-timeout';
  if (error instanceof StoreError) return 'store-down';
  return 'loader-failed';
}

function isNewer(entry: Entry, than: Entry | undefined): boolean {
  return than === undefined || entry.createdAt > than.createdAt;
}

function newestServable(a: Entry | undefined, b: Entry | undefined, now: number): Entry | undefined {
  const candidates = [a, b].filter((entry): entry is Entry => entry !== undefined && isServable(entry, now));
  if (candidates.length === 0) return undefined;
  return candidates.reduce((newest, entry) => (entry.createdAt > newest.createdAt ? entry : newest));
}

function toResult<T>(entry: Entry<T>, path: ReadPath, revalidated?: Promise<ReadResult<T> | undefined>): ReadResult<T> {
  return {
    value: entry.value,
    path,
    negative: isNegative(entry),
    createdAt: entry.createdAt,
    softExpireAt: entry.softExpireAt,
    hardExpireAt: entry.hardExpireAt,
    revalidated,
  };
}

function ignore(): void {
  // A background refresh reports its outcome through events; nobody awaits it.
}
