import { ClosedError } from '../errors/closed.error.js';
import { ConfigurationError } from '../errors/configuration.error.js';
import { LoadFencedError } from '../errors/load-fenced.error.js';
import { LoaderFailedError } from '../errors/loader-failed.error.js';
import { isLoaderFailure } from '../errors/loader-failure.js';
import { UpstreamUnavailableError } from '../errors/upstream-unavailable.error.js';
import { WaitAbortedError } from '../errors/wait-aborted.error.js';
import type { HerdStore, StoreSnapshot } from './herd-store.interface.js';
import { BackgroundRefresh } from './background-refresh.js';
import { parseTimerDuration } from './duration.js';
import { EngineRuntime } from './engine-runtime.js';
import { type Entry, isBornStale, isFresh, isNegative, isServable } from './entry.js';
import type { HerdEventListener, ReadPath } from './events.js';
import { type FillMode, FillProtocol, newEntry, staleReason, storable } from './fill-protocol.js';
import { Invalidation } from './invalidation.js';
import type { LoadScope } from './load-scope.js';
import { type Loader, assertLoader } from './loader.js';
import { type CachePolicy, type ResolvedPolicy, resolvePolicy, shouldRefreshEarly } from './policy.js';
import { PolicyCache } from './policy-cache.js';
import { reload } from './reload.js';
import { type ReadOptions, type ReadResult, sameTags, toResult } from './read-result.js';
import type { StatsSnapshot } from './stats.js';

export type { LoadContext, Loader } from './loader.js';
export type { ReadOptions, ReadResult } from './read-result.js';

export interface HerdEngineOptions {
  /** Where entries and leases live (the module opens a MemoryStore or a RedisStore). */
  readonly store: HerdStore;
  /** Default policy for every call. */
  readonly policy?: CachePolicy;
  /** Clock (epoch ms) for TTLs; never used to order writes. Replace only in tests. */
  readonly now?: () => number;
  /** Random source in [0, 1) for jitter, backoff and early refresh. */
  readonly random?: () => number;
}

/** Counts of what is in progress; all zero when the engine is idle. */
export interface EngineActivity {
  /**
   * Fills in progress: loads, or waits for another process's load (a fill overtaken by an
   * invalidation still counts until it ends).
   */
  readonly inflight: number;
  /** Callers waiting with their own timeout or signal armed. */
  readonly armedWaits: number;
  /** Loaders currently running. */
  readonly loaders: number;
  /** Lease releases and other store writes not yet acknowledged. */
  readonly pendingStoreOps: number;
}

/** An entry and how a caller was answered with it. */
interface Answer<T> {
  readonly entry: Entry<T>;
  readonly path: ReadPath;
}

/**
 * One store read and its routing, shared by the callers of a key that arrive in the same tick with
 * the same policy and tags (by value) and no limits of their own (signal, timeout).
 */
interface SharedRead {
  /** Callers that joined after the first. Written by `#read` while the read is in the map only. */
  joiners: number;
  readonly policy: ResolvedPolicy;
  readonly tags: readonly string[] | undefined;
  /** The first caller's answer, which every joiner receives. Written once, right after creation. */
  promise: Promise<unknown>;
}

const NOT_ROUTED: Promise<undefined> = Promise.resolve(undefined);

/**
 * The read path: fresh hit, stale hit with one background refresh, and a coalesced, leased load
 * on a miss. Writes and invalidations advance the key's version in the store, which fences loads
 * already running. Framework-free; the NestJS service wraps one engine.
 */
export class HerdEngine {
  readonly store: HerdStore;
  readonly #runtime: EngineRuntime;
  readonly #fills: FillProtocol;
  readonly #refresh: BackgroundRefresh;
  readonly #invalidation: Invalidation;
  readonly #defaults: ResolvedPolicy;
  readonly #policies: PolicyCache;
  /**
   * Store reads joinable by callers of the same key and options, only until the end of the tick
   * that sent them: a caller arriving later may come after an invalidation, so it reads anew.
   */
  readonly #sharedReads = new Map<string, SharedRead>();

  constructor(options: HerdEngineOptions) {
    this.store = options.store;
    this.#defaults = resolvePolicy(options.policy);
    this.#policies = new PolicyCache(options.policy);
    this.#runtime = new EngineRuntime(this.store, options.now ?? Date.now, options.random ?? Math.random);
    this.#invalidation = new Invalidation(this.#runtime);
    this.#fills = new FillProtocol(this.#runtime, (key) => this.#invalidation.delete(key));
    this.#refresh = new BackgroundRefresh(this.#runtime, this.#fills);
  }

  /** The default policy, resolved to milliseconds. */
  get defaults(): ResolvedPolicy {
    return this.#defaults;
  }

  get closed(): boolean {
    return this.#runtime.closed;
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
    this.#runtime.assertOpen(key);
    const scope = this.#runtime.scopes.current();
    if (scope !== undefined) await this.#linkInput(scope, key);
    const entry = this.#runtime.decoded(key, (await this.#runtime.storeGet(key)).entry) as Entry<T> | undefined;
    const now = this.#runtime.now();
    if (entry === undefined || !isServable(entry, now)) return undefined;
    scope?.record(entry, now);
    return toResult(entry, isFresh(entry, now) ? 'fresh' : 'stale');
  }

  /**
   * Stores `value` as the key's current value (a write-through after an update): it wins over
   * every earlier write and every load already running, whatever the pods' clocks say; values
   * derived from the key go stale. `null`/`undefined` store "not found".
   */
  async set<T>(key: string, value: T, options: Pick<ReadOptions, 'policy' | 'tags'> = {}): Promise<void> {
    this.#runtime.assertOpen(key);
    const policy = this.policyFor(options.policy);
    const now = this.#runtime.now();
    const stored = storable(key, value, policy);
    const entry = newEntry(stored, policy, this.#runtime.random, { loadStartedAt: now, now, version: 0 }, options.tags);
    await this.#invalidation.set(key, entry, policy);
  }

  /**
   * Marks `key` stale: the next read is served stale and refreshes once in the background (no
   * herd). Loads of the key already running are fenced (their value is not stored), and values
   * derived from the key go stale too. Resolves whether the key held a value.
   */
  async expire(key: string): Promise<boolean> {
    this.#runtime.assertOpen(key);
    return this.#invalidation.expire(key);
  }

  /** Removes `key` (and values derived from it); running loads of it are fenced. The next read is a miss. */
  async delete(key: string): Promise<void> {
    this.#runtime.assertOpen(key);
    await this.#invalidation.delete(key);
  }

  /** Marks every key stored with `tag` (and values derived from them) stale. Resolves how many held a value. */
  async expireTag(tag: string): Promise<number> {
    return this.#invalidation.tag(tag, 'stale');
  }

  /** Deletes every key stored with `tag` (and values derived from them). Resolves how many held a value. */
  async deleteTag(tag: string): Promise<number> {
    return this.#invalidation.tag(tag, 'delete');
  }

  /**
   * Loads `key` now, even if a fresh value is cached (prefetch, after an update). Always a new load:
   * a load of the key already running here or elsewhere is taken over (and fenced).
   */
  async refresh<T>(
    key: string,
    loader: Loader<T>,
    options: Pick<ReadOptions, 'policy' | 'tags'> = {},
  ): Promise<ReadResult<T>> {
    this.#runtime.assertOpen(key);
    assertLoader(loader);
    return reload(this.#runtime, this.#fills, key, loader, this.policyFor(options.policy), options.tags, 'forced');
  }

  /**
   * Loads `key` ahead of traffic: like {@link refresh}, but a load of the key already running (here
   * or on another pod, started after this call's read) is waited for instead of taken over, so pods
   * warming the same keys at once load each one once.
   */
  async warm<T>(
    key: string,
    loader: Loader<T>,
    options: Pick<ReadOptions, 'policy' | 'tags'> = {},
  ): Promise<ReadResult<T>> {
    this.#runtime.assertOpen(key);
    assertLoader(loader);
    return reload(this.#runtime, this.#fills, key, loader, this.policyFor(options.policy), options.tags, 'warm');
  }

  /** Resolves a per-call policy over the defaults (cached per policy object). Throws ConfigurationError. */
  policyFor(policy: CachePolicy | undefined): ResolvedPolicy {
    return policy === undefined ? this.#defaults : this.#policies.resolve(policy);
  }

  /** Subscribes to engine events (metrics, logs). Returns the unsubscribe function. */
  onEvent(listener: HerdEventListener): () => void {
    const { listeners } = this.#runtime;
    listeners.push(listener);
    return () => {
      const index = listeners.indexOf(listener);
      if (index >= 0) listeners.splice(index, 1);
    };
  }

  /** Counters since start. */
  stats(): StatsSnapshot {
    return this.#runtime.stats.snapshot(this.#runtime.fills.size + this.#runtime.refreshesStarting);
  }

  activity(): EngineActivity {
    const runtime = this.#runtime;
    return {
      inflight: runtime.fills.size + runtime.refreshesStarting,
      armedWaits: runtime.flights.armedWaits,
      loaders: runtime.loaders.size,
      pendingStoreOps: runtime.pendingOps.size,
    };
  }

  /**
   * Aborts running loaders, ends followers' waits, and waits for the fills to end and their lease
   * releases to be acknowledged; refuses new reads. Does not close the store.
   */
  async close(): Promise<void> {
    const runtime = this.#runtime;
    if (!runtime.closed) {
      runtime.closed = true;
      for (const [loader, key] of runtime.loaders) loader.abort(new ClosedError(key));
      // Followers stop waiting (their fill loop then sees the engine closed and rejects).
      for (const watch of runtime.watches) watch.close();
    }
    await Promise.allSettled([...runtime.fills]);
    await Promise.allSettled([...runtime.pendingOps]);
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
      this.#runtime.assertOpen(key);
      assertLoader(loader);
      policy = this.policyFor(options?.policy);
      if (options?.timeout !== undefined) parseTimerDuration(options.timeout, 'timeout');
    } catch (error) {
      return Promise.reject(error);
    }
    // Inside a loader: this key is an input of the value being loaded.
    const scope = this.#runtime.scopes.current();
    if (scope !== undefined) return this.#readInput(scope, key, loader, policy, options, full);
    const shareable = !full && options?.signal === undefined && options?.timeout === undefined;
    if (shareable) {
      // Callers of a key with the same policy and tags share a store read sent in this tick (and its routing).
      const shared = this.#sharedReads.get(key);
      if (shared !== undefined && shared.policy === policy && sameTags(shared.tags, options?.tags)) {
        shared.joiners += 1;
        return shared.promise as Promise<T>;
      }
    }
    const startedAt = this.#runtime.listeners.length > 0 ? performance.now() : 0;
    let found: StoreSnapshot | Promise<StoreSnapshot>;
    try {
      found = this.store.get(key);
    } catch (error) {
      found = Promise.reject(error);
    }
    if (!(found instanceof Promise)) {
      return Promise.resolve(this.#route(key, found, loader, policy, options, startedAt, full, undefined));
    }
    const shared: SharedRead | undefined = shareable
      ? { joiners: 0, policy, tags: options?.tags, promise: NOT_ROUTED }
      : undefined;
    const routed = found.then(
      (snapshot) => this.#route(key, snapshot, loader, policy, options, startedAt, full, shared),
      (error: unknown) =>
        this.#route(key, this.#runtime.storeReadFailed(key, error), loader, policy, options, startedAt, full, shared),
    );
    if (shared !== undefined) {
      shared.promise = routed;
      this.#sharedReads.set(key, shared);
      queueMicrotask(() => {
        if (this.#sharedReads.get(key) === shared) this.#sharedReads.delete(key);
      });
    }
    return routed;
  }

  /** Chooses the path for what the store returned. */
  #route<T>(
    key: string,
    snapshot: StoreSnapshot,
    loader: Loader<T>,
    policy: ResolvedPolicy,
    options: ReadOptions | undefined,
    startedAt: number,
    full: boolean,
    shared: SharedRead | undefined,
  ): T | ReadResult<T> | Promise<T | ReadResult<T>> {
    const entry = this.#runtime.decoded(key, snapshot.entry) as Entry<T> | undefined;
    const now = this.#runtime.now();
    // Fresh: answer (and maybe refresh early, in the background).
    if (entry !== undefined && isFresh(entry, now)) {
      if (this.#shouldRefreshEarly(entry, policy, now)) {
        this.#refresh.start(key, loader, policy, entry, snapshot.version, options?.tags);
      }
      return this.#answer(key, entry, 'fresh', startedAt, full, shared);
    }
    // Stale: answer at once, refresh once in the background.
    if (entry !== undefined && isServable(entry, now) && policy.staleWhileRevalidate) {
      if (!full) {
        this.#refresh.start(key, loader, policy, entry, snapshot.version, options?.tags);
        return this.#answer(key, entry, 'stale', startedAt, false, shared);
      }
      const revalidated = this.#refresh.revalidation(key, loader, policy, entry, snapshot.version, options?.tags);
      return this.#answer(key, entry, 'stale', startedAt, true, undefined, revalidated);
    }
    // Nothing servable without waiting: join or start the load.
    const stale = entry !== undefined && isServable(entry, now) ? entry : undefined;
    return this.#fillFor(key, loader, policy, options, stale, snapshot.version, 'miss', shared?.joiners ?? 0).then(
      (answer) => this.#answer(key, answer.entry, answer.path, startedAt, full, shared),
    );
  }

  /**
   * A read made by another key's loader: it records the dependency before reading (so an
   * invalidation of this key reaches the value being loaded), never settles for a stale value while
   * a load can give a fresh one, and bounds the loaded value's expiry by this one's.
   */
  async #readInput<T>(
    scope: LoadScope,
    key: string,
    loader: Loader<T>,
    policy: ResolvedPolicy,
    options: ReadOptions | undefined,
    full: boolean,
  ): Promise<T | ReadResult<T>> {
    if (this.#runtime.scopes.cycles(scope, key)) {
      throw new ConfigurationError(
        'loader',
        `the loader of "${scope.key}" reads "${key}", whose load is waiting for it (a dependency cycle)`,
      );
    }
    const startedAt = this.#runtime.listeners.length > 0 ? performance.now() : 0;
    scope.waitingOn.add(key);
    try {
      await this.#linkInput(scope, key);
      const snapshot = await this.#runtime.storeGet(key);
      const entry = this.#runtime.decoded(key, snapshot.entry) as Entry<T> | undefined;
      const now = this.#runtime.now();
      let answer: Answer<T>;
      if (entry !== undefined && isFresh(entry, now)) answer = { entry, path: 'fresh' };
      else {
        const stale = entry !== undefined && isServable(entry, now) ? entry : undefined;
        answer = await this.#fillFor(key, loader, policy, options, stale, snapshot.version, 'input', 0);
      }
      scope.record(answer.entry, this.#runtime.now());
      return this.#answer(key, answer.entry, answer.path, startedAt, full);
    } finally {
      scope.waitingOn.delete(key);
    }
  }

  /** Records `scope`'s key as derived from `key`; if that fails, the derived value is stored stale. */
  async #linkInput(scope: LoadScope, key: string): Promise<void> {
    try {
      await this.store.addToIndex({ inputOf: key }, scope.key, scope.linkTtlMs);
    } catch (error) {
      scope.untracked = true;
      this.#runtime.emit({ type: 'store-error', operation: 'index-input', key, error });
    }
  }

  /**
   * A caller with nothing it may be given at once: join the key's flight if it reflects what the
   * caller saw, or start one, bounded by the caller's own limits. `joiners` are callers sharing
   * this caller's store read (they join too).
   */
  #fillFor<T>(
    key: string,
    loader: Loader<T>,
    policy: ResolvedPolicy,
    options: ReadOptions | undefined,
    stale: Entry<T> | undefined,
    version: number,
    mode: FillMode,
    joiners: number,
    retries = 1,
  ): Promise<Answer<T>> {
    const { flights } = this.#runtime;
    const joined = (flights.joinable(key, version) ? 1 : 0) + joiners;
    for (let i = 0; i < joined; i += 1) this.#runtime.emit({ type: 'coalesced', key });
    const tags = options?.tags;
    const timeoutMs = this.#callerTimeoutMs(options, policy, stale);
    const limits =
      options?.signal === undefined && timeoutMs === undefined ? undefined : { signal: options?.signal, timeoutMs };
    const fill = flights.run(
      key,
      version,
      (cell) => this.#fills.run({ key, loader, policy, stale, tags, mode, fromVersion: version, cell }),
      limits,
    );
    return fill.then(
      (filled): Answer<T> => {
        const entry = filled.entry as Entry<T>;
        const now = this.#runtime.now();
        if (filled.loaded) return { entry, path: isBornStale(entry) ? 'stale' : 'miss' };
        // A joined refresh may hand back a value that expired while it ran: never serve it.
        if (!isServable(entry, now)) {
          if (stale !== undefined && isServable(stale, now)) return { entry: stale, path: 'stale' };
          throw new UpstreamUnavailableError(key, 0);
        }
        return { entry, path: !isFresh(entry, now) ? 'stale' : entry === stale ? 'fresh' : 'miss' };
      },
      (error: unknown): Answer<T> | Promise<Answer<T>> => {
        // The refresh this caller joined was fenced by an invalidation: it gets a new load.
        if (error instanceof LoadFencedError && stale === undefined && retries > 0) {
          return this.#fillFor(key, loader, policy, options, stale, version, mode, 0, retries - 1);
        }
        // A client error (the key is gone, or forbidden now) reaches the caller: no stale value instead.
        const answered = !isLoaderFailure(error instanceof LoaderFailedError ? error.cause : error);
        if (
          stale !== undefined &&
          !answered &&
          !(error instanceof WaitAbortedError) &&
          isServable(stale, this.#runtime.now())
        ) {
          // Waited longer than loaderSoftTimeout (or its own timeout), or the shared load failed.
          if (!(error instanceof LoadFencedError)) {
            this.#runtime.emit({ type: 'stale-on-error', key, reason: staleReason(error) });
          }
          return { entry: stale, path: 'stale' };
        }
        throw error;
      },
    );
  }

  #shouldRefreshEarly(entry: Entry, policy: ResolvedPolicy, now: number): boolean {
    return (
      policy.earlyRefreshBeta > 0 &&
      shouldRefreshEarly(policy, entry.softExpireAt, entry.loadMs, now, this.#runtime.random)
    );
  }

  #callerTimeoutMs(
    options: ReadOptions | undefined,
    policy: ResolvedPolicy,
    stale: Entry | undefined,
  ): number | undefined {
    const own = options?.timeout === undefined ? undefined : parseTimerDuration(options.timeout, 'timeout');
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
    const runtime = this.#runtime;
    runtime.stats.countRead(path, negative, callers);
    if (runtime.listeners.length > 0) {
      const durationMs = startedAt === 0 ? 0 : performance.now() - startedAt;
      for (let i = 0; i < callers; i += 1) runtime.emit({ type: 'read', key, path, negative, durationMs });
    }
    return full ? toResult(entry, path, revalidated) : entry.value;
  }
}
