import { ClosedError } from '../errors/closed.error.js';
import { ConfigurationError } from '../errors/configuration.error.js';
import { LoadFencedError } from '../errors/load-fenced.error.js';
import { LoaderFailedError } from '../errors/loader-failed.error.js';
import { isLoaderFailure } from '../errors/loader-failure.js';
import { LoaderTimeoutError } from '../errors/loader-timeout.error.js';
import { StoreError } from '../errors/store.error.js';
import { UpstreamUnavailableError } from '../errors/upstream-unavailable.error.js';
import { WaitAbortedError } from '../errors/wait-aborted.error.js';
import { WaitTimeoutError } from '../errors/wait-timeout.error.js';
import { BackgroundRefresh, type RefreshRequest } from './background-refresh.js';
import { parseTimerDuration } from './duration.js';
import { EngineRuntime, UNREACHABLE } from './engine-runtime.js';
import { type Entry, isBornStale, isFresh, isNegative, isServable, newEntry } from './entry.js';
import type { HerdEventListener, ReadCounter, ReadPath } from './events.js';
import { FillProtocol } from './fill-protocol.js';
import type { HerdStore, StoreSnapshot } from './herd-store.interface.js';
import { type ClearMode, Invalidation } from './invalidation.js';
import type { LoadScope } from './load-scope.js';
import type { LoadTracer } from './load-tracer.js';
import { type LoadContext, type Loader, assertLoader } from './loader.js';
import {
  type CachePolicy,
  type ResolvedPolicy,
  resolvePolicy,
  shouldRefreshEarly,
} from './policy.js';
import { PolicyCache } from './policy-cache.js';
import { type ReadOptions, type ReadResult, sameTags, toResult } from './read-result.js';
import { storable } from './serializers.js';
import type { StatsSnapshot } from './stats.js';

export type { LoadContext, LoadPolicy, Loader } from './loader.js';
export type { ReadOptions, ReadResult } from './read-result.js';
export type { ClearMode } from './invalidation.js';

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

/**
 * What a caller gets: the value alone (no object per caller on the hot path), or a {@link
 * ReadResult}.
 */
type Wants = 'value' | 'result';

/** The options of `set()`, `refresh()` and `warm()`. */
type WriteOptions = Pick<ReadOptions, 'policy' | 'tags'>;

/**
 * One read, built once by `#read` and passed down its path (a fresh hit of the hot path answers
 * before one is built). A read with no limits of its own (signal, timeout) is shared by the callers
 * of the key that arrive in the same tick with the same policy and tags.
 */
interface ReadRequest<T> extends RefreshRequest<T> {
  readonly signal: AbortSignal | undefined;
  readonly timeoutMs: number | undefined;
  /** `performance.now()` when the read began; 0 when no listener wants read durations. */
  readonly startedAt: number;
  readonly wants: Wants;
  /** `input` for a read made by another key's loader (it never settles for a stale value). */
  readonly mode: 'miss' | 'input';
  /** Callers that joined after the first. Written by `#read` while the read is shared only. */
  joiners: number;
  /**
   * The first caller's answer, which every joiner receives. Written once, right after the read is
   * sent.
   */
  routed: Promise<unknown>;
}

/** An entry and how a caller was answered with it. */
interface Served<T> {
  readonly entry: Entry<T>;
  readonly path: ReadPath;
}

const NOT_ROUTED: Promise<undefined> = Promise.resolve(undefined);

/**
 * The last synchronous answer of a shareable read (a hit the store answered from memory), which the
 * callers of the same key, policy and tags that come in the same tick receive without reading the
 * store again. One object per engine, rewritten in place and emptied once per tick.
 */
class TickAnswer {
  key: string | undefined = undefined;
  policy: ResolvedPolicy | undefined = undefined;
  tags: readonly string[] | undefined = undefined;
  path: ReadPath = 'fresh';
  negative = false;
  answer: Promise<unknown> | undefined = undefined;

  /** Whether callers of `key` with this policy and these tags may take the answer. */
  isFor(key: string, policy: ResolvedPolicy, tags: readonly string[] | undefined): boolean {
    return this.key === key && this.policy === policy && sameTags(this.tags, tags);
  }

  /** Names the callers the answer is for (in place). */
  for(key: string, policy: ResolvedPolicy, tags: readonly string[] | undefined): void {
    this.key = key;
    this.policy = policy;
    this.tags = tags;
  }

  clear(): void {
    this.key = undefined;
    this.policy = undefined;
    this.tags = undefined;
    this.answer = undefined;
  }
}

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
  readonly #sharedReads = new Map<string, ReadRequest<unknown>>();
  /**
   * The synchronous answer joinable until the end of the tick that made it (see `#sharedReads` for
   * why no later). Written by `#shareAnswer`, emptied by `#endTick`.
   */
  readonly #tickAnswer = new TickAnswer();
  /** Whether `#endTick` is queued. */
  #tickEnding = false;
  readonly #endTick = (): void => {
    this.#tickAnswer.clear();
    this.#tickEnding = false;
  };

  constructor(options: HerdEngineOptions) {
    this.store = options.store;
    this.#defaults = resolvePolicy(options.policy);
    this.#policies = new PolicyCache(options.policy);
    this.#runtime = new EngineRuntime(
      this.store,
      options.now ?? Date.now,
      options.random ?? Math.random,
    );
    this.#invalidation = new Invalidation(this.store, (keys) => this.#runtime.flights.detach(keys));
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

  /**
   * Returns the value of `key`, loading it with `loader` at most once across all concurrent
   * callers.
   */
  getOrLoad<T>(key: string, loader: Loader<T>, options?: ReadOptions): Promise<T> {
    return this.#read(key, loader, options, 'value') as Promise<T>;
  }

  /** Like {@link getOrLoad}, with how the read was answered and the entry's timing. */
  read<T>(key: string, loader: Loader<T>, options?: ReadOptions): Promise<ReadResult<T>> {
    return this.#read(key, loader, options, 'result') as Promise<ReadResult<T>>;
  }

  /** The servable value of `key` without loading: `undefined` when absent or past hard expiry. */
  async peek<T>(key: string): Promise<ReadResult<T> | undefined> {
    this.#runtime.assertOpen(key);
    const scope = this.#runtime.scopes.current();
    if (scope !== undefined) await this.#linkInput(scope, key);
    const snapshot =
      scope === undefined
        ? await this.#runtime.storeGet(key)
        : await this.#readInputAtStore(scope, key);
    const entry = this.#runtime.decoded(key, snapshot.entry) as Entry<T> | undefined;
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
  async set<T>(key: string, value: T, options: WriteOptions = {}): Promise<void> {
    this.#runtime.assertOpen(key);
    const policy = this.policyFor(options.policy);
    const now = this.#runtime.now();
    const stored = storable(key, value, policy.serializer);
    const { random } = this.#runtime;
    const entry = newEntry({
      value: stored,
      policy,
      random,
      loadStartedAt: undefined,
      now,
      version: 0,
      tags: options.tags,
    });
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

  /**
   * Removes `key` (and values derived from it); running loads of it are fenced. The next read is a
   * miss.
   */
  async delete(key: string): Promise<void> {
    this.#runtime.assertOpen(key);
    await this.#invalidation.delete(key);
  }

  /**
   * Invalidates every key of the cache in one step, without listing them: `expire` (default) marks
   * them stale (each is served stale to every read until its one refresh lands), `delete` removes them. Loads
   * running on any pod are fenced, as by {@link expire} and {@link delete}.
   */
  async clear(mode: ClearMode = 'expire'): Promise<void> {
    if (this.closed) throw new ClosedError();
    await this.#invalidation.clear(mode);
  }

  /**
   * Marks every key stored with `tag` (and values derived from them) stale. Resolves how many held
   * a value.
   */
  async expireTag(tag: string): Promise<number> {
    return this.#invalidation.tag(tag, 'stale');
  }

  /**
   * Deletes every key stored with `tag` (and values derived from them). Resolves how many held a
   * value.
   */
  async deleteTag(tag: string): Promise<number> {
    return this.#invalidation.tag(tag, 'delete');
  }

  /**
   * Loads `key` now, even if a fresh value is cached (prefetch, after an update). Always a new
   * load: a load of the key already running here or elsewhere is taken over (and fenced). Once the
   * new value is stored, values derived from the key go stale, before the call resolves.
   */
  refresh<T>(key: string, loader: Loader<T>, options: WriteOptions = {}): Promise<ReadResult<T>> {
    return this.#reload(key, loader, options, 'forced');
  }

  /**
   * Loads `key` ahead of traffic: like {@link refresh}, but a load of the key already running (here
   * or on another pod, started after this call's read) is waited for instead of taken over, so pods
   * warming the same keys at once load each one once. A value it stores makes values derived from
   * the key stale, as `refresh()` does.
   */
  warm<T>(key: string, loader: Loader<T>, options: WriteOptions = {}): Promise<ReadResult<T>> {
    return this.#reload(key, loader, options, 'warm');
  }

  /**
   * Resolves a per-call policy over the defaults (cached per policy object). Throws
   * ConfigurationError.
   */
  policyFor(policy: CachePolicy | undefined): ResolvedPolicy {
    return policy === undefined ? this.#defaults : this.#policies.resolve(policy);
  }

  /**
   * The context of the loader this code runs inside (the innermost load of this engine in the
   * current async context), or `undefined` outside a loader: code a loader calls (a decorated
   * method, a route handler, a repository) can choose how the value is cached without being passed
   * the context.
   */
  currentLoad<T = unknown>(): LoadContext<T> | undefined {
    return this.#runtime.scopes.current()?.context as LoadContext<T> | undefined;
  }

  /**
   * Follows loads and the callers waiting for them with `tracer` (one at a time: it replaces the
   * previous one). Hits are never traced. Returns the function that stops it.
   */
  trace(tracer: LoadTracer): () => void {
    const runtime = this.#runtime;
    runtime.tracer = tracer;
    return () => {
      if (runtime.tracer === tracer) runtime.tracer = undefined;
    };
  }

  /**
   * Subscribes to engine events (metrics, logs). With `{ reads: false }` the listener gets every
   * event but `read`, and hits do no work for it (no event, no clock read). Returns the
   * unsubscribe function.
   */
  onEvent(listener: HerdEventListener, options?: { readonly reads?: boolean }): () => void {
    return this.#runtime.subscribe(listener, options?.reads !== false);
  }

  /**
   * Tells `counter` the key of every answered read, once per answer with the number of callers
   * it answered (hot keys). Returns the function that stops it.
   */
  countReads(counter: ReadCounter): () => void {
    return this.#runtime.countReads(counter);
  }

  /** Counters since start. */
  stats(): StatsSnapshot {
    return this.#runtime.stats.snapshot(this.#inflight());
  }

  activity(): EngineActivity {
    return {
      inflight: this.#inflight(),
      armedWaits: this.#runtime.flights.armedWaits,
      loaders: this.#fills.loading(),
      pendingStoreOps: this.#runtime.pendingStoreOps(),
    };
  }

  /**
   * Aborts running loaders, ends followers' waits, and waits for the fills to end and their lease
   * releases to be acknowledged; refuses new reads. Does not close the store.
   */
  async close(): Promise<void> {
    if (!this.#runtime.closed) {
      this.#runtime.close();
      this.#fills.stop();
    }
    await this.#fills.settled();
    await this.#runtime.settled();
  }

  /** Fills running, and background refreshes about to start one. */
  #inflight(): number {
    return this.#fills.running() + this.#refresh.starting();
  }

  /**
   * A load that does not wait for expiry, whose value comes from a load started after this call
   * read the key: `forced` takes over a load running here or elsewhere, `warm` waits for it.
   */
  async #reload<T>(
    key: string,
    loader: Loader<T>,
    options: WriteOptions,
    mode: 'forced' | 'warm',
  ): Promise<ReadResult<T>> {
    const runtime: EngineRuntime = this.#runtime;
    runtime.assertOpen(key);
    assertLoader(loader);
    const policy = this.policyFor(options.policy);
    const { tags } = options;
    const snapshot = await runtime.storeGet(key);
    const current = runtime.decoded(key, snapshot.entry);
    const stale = current !== undefined && isServable(current, runtime.now()) ? current : undefined;
    const { flights } = runtime;
    const start = mode === 'forced' ? flights.restart.bind(flights) : flights.run.bind(flights);
    const fill = await start(key, snapshot.version, (cell) =>
      this.#fills.run({
        key,
        loader,
        policy,
        stale,
        tags,
        mode,
        fromVersion: snapshot.version,
        cell,
      }),
    );
    // The key's value was replaced before it expired: what was derived from the old one goes
    // stale before the call resolves, as after an invalidation (values loaded from then on read
    // the new one).
    if (fill.stored === true) await this.#invalidation.dependentsOf(key);
    // A value loaded after the call (here or elsewhere) is a miss; the fail-safe stale value says
    // so.
    const fresh =
      isFresh(fill.entry, runtime.now()) && fill.entry !== stale && !isBornStale(fill.entry);
    return toResult(fill.entry as Entry<T>, fresh ? 'miss' : 'stale');
  }

  // --- the read path -------------------------------------------------------------------------

  /**
   * One read: the store's answer is routed once per caller (or once for callers sharing the read).
   */
  #read<T>(
    key: string,
    loader: Loader<T>,
    options: ReadOptions | undefined,
    wants: Wants,
  ): Promise<T | ReadResult<T>> {
    const runtime: EngineRuntime = this.#runtime;
    let policy: ResolvedPolicy;
    let timeoutMs: number | undefined;
    try {
      runtime.assertOpen(key);
      assertLoader(loader);
      policy = this.policyFor(options?.policy);
      if (options?.timeout !== undefined)
        timeoutMs = parseTimerDuration(options.timeout, 'timeout');
    } catch (error) {
      return Promise.reject(error);
    }
    const tags = options?.tags;
    const signal = options?.signal;
    const startedAt = runtime.readListeners.length > 0 ? performance.now() : 0;
    // Inside a loader: this key is an input of the value being loaded.
    const scope = runtime.scopes.current();
    if (scope !== undefined) {
      const input: ReadRequest<T> = {
        key,
        loader,
        policy,
        tags,
        signal,
        timeoutMs,
        startedAt,
        wants,
        mode: 'input',
        joiners: 0,
        routed: NOT_ROUTED,
      };
      return this.#readInput(scope, input);
    }
    const shareable = wants === 'value' && signal === undefined && timeoutMs === undefined;
    if (shareable) {
      // Callers of a key with the same policy and tags share an answer given from memory in this
      // tick, or a store read sent in this tick (and its routing).
      const slot = this.#tickAnswer;
      if (slot.isFor(key, policy, tags)) {
        this.#counted(key, slot.path, slot.negative, startedAt);
        return slot.answer as Promise<T>;
      }
      const shared = this.#sharedReads.get(key);
      if (shared !== undefined && shared.policy === policy && sameTags(shared.tags, tags)) {
        shared.joiners += 1;
        return shared.routed as Promise<T>;
      }
    }
    let found: StoreSnapshot | Promise<StoreSnapshot>;
    try {
      found = this.store.get(key);
    } catch (error) {
      found = Promise.reject(error);
    }
    let entry: Entry<T> | undefined;
    let now = 0;
    if (!(found instanceof Promise)) {
      entry = runtime.decoded(key, found.entry) as Entry<T> | undefined;
      now = runtime.now();
      // Most reads end here: a fresh hit, answered without building a request.
      if (entry !== undefined && policy.earlyRefreshBeta === 0 && isFresh(entry, now)) {
        const answer = Promise.resolve(this.#hit(key, entry, startedAt, wants));
        if (shareable) this.#shareAnswer(entry, 'fresh', answer).for(key, policy, tags);
        return answer;
      }
    }
    const read: ReadRequest<T> = {
      key,
      loader,
      policy,
      tags,
      signal,
      timeoutMs,
      startedAt,
      wants,
      mode: 'miss',
      joiners: 0,
      routed: NOT_ROUTED,
    };
    if (!(found instanceof Promise)) {
      const routed = this.#route(read, entry, found.version, now);
      if (routed instanceof Promise) return routed;
      const answer = Promise.resolve(routed);
      // Answered at once (stale, or fresh with an early refresh): the same for this tick's callers.
      if (shareable && entry !== undefined) {
        const path = isFresh(entry, now) ? 'fresh' : 'stale';
        this.#shareAnswer(entry, path, answer).for(key, policy, tags);
      }
      return answer;
    }
    const routed = found.then(
      (snapshot) => this.#routeSnapshot(read, snapshot),
      (error: unknown) => this.#routeSnapshot(read, runtime.storeReadFailed(key, error)),
    );
    if (shareable) {
      read.routed = routed;
      this.#sharedReads.set(key, read as ReadRequest<unknown>);
      queueMicrotask(() => {
        if (this.#sharedReads.get(key) === read) this.#sharedReads.delete(key);
      });
    }
    return routed;
  }

  /**
   * Keeps `answer` for the callers that come in this tick; the caller names them with `for()` on
   * the slot returned (see `#tickAnswer`).
   */
  #shareAnswer(entry: Entry, path: ReadPath, answer: Promise<unknown>): TickAnswer {
    const slot = this.#tickAnswer;
    slot.path = path;
    slot.negative = isNegative(entry);
    slot.answer = answer;
    if (!this.#tickEnding) {
      this.#tickEnding = true;
      queueMicrotask(this.#endTick);
    }
    return slot;
  }

  #routeSnapshot<T>(
    read: ReadRequest<T>,
    snapshot: StoreSnapshot,
  ): T | ReadResult<T> | Promise<T | ReadResult<T>> {
    const entry = this.#runtime.decoded(read.key, snapshot.entry) as Entry<T> | undefined;
    return this.#route(read, entry, snapshot.version, this.#runtime.now());
  }

  /** Chooses the path for what the store returned (`entry` at `version`, read at `now`). */
  #route<T>(
    read: ReadRequest<T>,
    entry: Entry<T> | undefined,
    version: number,
    now: number,
  ): T | ReadResult<T> | Promise<T | ReadResult<T>> {
    const { policy } = read;
    // Fresh: answer (and maybe refresh early, in the background).
    if (entry !== undefined && isFresh(entry, now)) {
      if (this.#shouldRefreshEarly(entry, policy, now)) this.#refresh.start(read, entry, version);
      return this.#answer(read, entry, 'fresh');
    }
    // Stale: answer at once, refresh once in the background.
    if (entry !== undefined && isServable(entry, now) && policy.staleWhileRevalidate) {
      if (read.wants === 'value') {
        this.#refresh.start(read, entry, version);
        return this.#answer(read, entry, 'stale');
      }
      return this.#answer(read, entry, 'stale', this.#refresh.revalidation(read, entry, version));
    }
    // Nothing servable without waiting: join or start the load.
    const stale = entry !== undefined && isServable(entry, now) ? entry : undefined;
    return this.#fillFor(read, stale, version).then((served) =>
      this.#answer(read, served.entry, served.path),
    );
  }

  /**
   * A read made by another key's loader: it records the dependency before reading (so an
   * invalidation of this key reaches the value being loaded), never settles for a stale value while
   * a load can give a fresh one, and bounds the loaded value's expiry by this one's.
   */
  async #readInput<T>(scope: LoadScope, read: ReadRequest<T>): Promise<T | ReadResult<T>> {
    const { key } = read;
    if (this.#runtime.scopes.cycles(scope, key)) {
      throw new ConfigurationError(
        'loader',
        `the loader of "${scope.key}" reads "${key}", whose load is waiting for it (a dependency cycle)`,
      );
    }
    scope.waitingOn.add(key);
    try {
      await this.#linkInput(scope, key);
      const snapshot = await this.#readInputAtStore(scope, key);
      const entry = this.#runtime.decoded(key, snapshot.entry) as Entry<T> | undefined;
      const now = this.#runtime.now();
      let served: Served<T>;
      if (entry !== undefined && isFresh(entry, now)) served = { entry, path: 'fresh' };
      else {
        const stale = entry !== undefined && isServable(entry, now) ? entry : undefined;
        served = await this.#fillFor(read, stale, snapshot.version);
      }
      scope.record(served.entry, this.#runtime.now());
      return this.#answer(read, served.entry, served.path);
    } finally {
      scope.waitingOn.delete(key);
    }
  }

  /**
   * Reads an input of `scope`'s load at the store, after its link was recorded: a write of `key`
   * that landed before this read is seen by it, and one that lands after it reaches the value being
   * loaded through the link (and fences its fill). A copy kept in this process may lag behind
   * other pods' writes, so it is never asked. An input the store could not answer leaves the value
   * untracked (stored stale).
   */
  async #readInputAtStore(scope: LoadScope, key: string): Promise<StoreSnapshot> {
    const snapshot = await this.#runtime.readAtStore(key);
    if (snapshot !== undefined) return snapshot;
    scope.untracked = true;
    return UNREACHABLE;
  }

  /**
   * Records `scope`'s key as derived from `key`; if that fails, the derived value is stored stale.
   */
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
   * caller saw (`version`), or start one, bounded by the caller's own limits. The callers sharing
   * this read join too; a `retry` (after the joined flight was fenced) counts only this caller.
   */
  #fillFor<T>(
    read: ReadRequest<T>,
    stale: Entry<T> | undefined,
    version: number,
    retry = false,
  ): Promise<Served<T>> {
    const { key, loader, policy, tags, mode } = read;
    const runtime = this.#runtime;
    const { flights } = runtime;
    const joined = (flights.joinable(key, version) ? 1 : 0) + (retry ? 0 : read.joiners);
    if (joined > 0) runtime.emit({ type: 'coalesced', key, callers: joined });
    const timeoutMs = this.#callerTimeoutMs(read, stale);
    const limits =
      read.signal === undefined && timeoutMs === undefined
        ? undefined
        : { signal: read.signal, timeoutMs };
    const fill = flights.run(
      key,
      version,
      (cell) =>
        this.#fills.run({ key, loader, policy, stale, tags, mode, fromVersion: version, cell }),
      limits,
    );
    const served = fill.then(
      (filled): Served<T> => {
        const entry = filled.entry as Entry<T>;
        const now = runtime.now();
        if (filled.loaded) return { entry, path: isBornStale(entry) ? 'stale' : 'miss' };
        // A joined refresh may hand back a value that expired while it ran: never serve it.
        if (!isServable(entry, now)) {
          if (stale !== undefined && isServable(stale, now)) return { entry: stale, path: 'stale' };
          throw new UpstreamUnavailableError(key, 0);
        }
        return { entry, path: !isFresh(entry, now) ? 'stale' : entry === stale ? 'fresh' : 'miss' };
      },
      (error: unknown): Served<T> | Promise<Served<T>> => {
        // The refresh this caller joined was fenced by an invalidation: it gets a new load.
        if (error instanceof LoadFencedError && stale === undefined && !retry) {
          return this.#fillFor(read, stale, version, true);
        }
        // A client error (the key is gone, or forbidden now) reaches the caller: no stale value
        // instead.
        const answered = !isLoaderFailure(error instanceof LoaderFailedError ? error.cause : error);
        if (
          stale !== undefined &&
          !answered &&
          !(error instanceof WaitAbortedError) &&
          isServable(stale, runtime.now())
        ) {
          // Waited longer than loaderSoftTimeout (or its own timeout), or the shared load failed.
          if (!(error instanceof LoadFencedError)) {
            runtime.emit({ type: 'stale-on-error', key, reason: staleReason(error) });
          }
          return { entry: stale, path: 'stale' };
        }
        throw error;
      },
    );
    const { tracer } = runtime;
    if (tracer !== undefined && joined > 0) {
      const own = joined > (retry ? 0 : read.joiners);
      tracer.joined(
        key,
        joined,
        own,
        served.then(
          ({ path }) => ({ path }),
          (error: unknown) => ({ error }),
        ),
      );
    }
    return served;
  }

  #shouldRefreshEarly(entry: Entry, policy: ResolvedPolicy, now: number): boolean {
    return (
      policy.earlyRefreshBeta > 0 &&
      shouldRefreshEarly(policy, entry.softExpireAt, entry.loadMs, now, this.#runtime.random)
    );
  }

  /**
   * How long the caller waits: its own timeout, and with a stale value in hand at most
   * loaderSoftTimeout.
   */
  #callerTimeoutMs<T>(read: ReadRequest<T>, stale: Entry | undefined): number | undefined {
    const own = read.timeoutMs;
    const soft = stale === undefined ? undefined : read.policy.loaderSoftTimeoutMs;
    if (own === undefined) return soft;
    return soft === undefined ? own : Math.min(own, soft);
  }

  /** A fresh hit of the hot path: one caller, counted and reported like {@link #answer}. */
  #hit<T>(key: string, entry: Entry<T>, startedAt: number, wants: Wants): T | ReadResult<T> {
    this.#counted(key, 'fresh', isNegative(entry), startedAt);
    return wants === 'value' ? entry.value : toResult(entry, 'fresh');
  }

  /** Counts and reports one caller answered without a read of its own. */
  #counted(key: string, path: ReadPath, negative: boolean, startedAt: number): void {
    const runtime = this.#runtime;
    runtime.stats.countRead(path, negative);
    runtime.countAnswer(key, 1);
    if (runtime.readListeners.length > 0) {
      const durationMs = elapsedMs(startedAt);
      runtime.emitRead({ type: 'read', key, path, negative, durationMs }, 1);
    }
  }

  /** Counts and reports the read (for every caller sharing it), and gives the caller its answer. */
  #answer<T>(
    read: ReadRequest<T>,
    entry: Entry<T>,
    path: ReadPath,
    revalidated?: Promise<ReadResult<T> | undefined>,
  ): T | ReadResult<T> {
    const negative = isNegative(entry);
    const callers = 1 + read.joiners;
    const runtime = this.#runtime;
    runtime.stats.countRead(path, negative, callers);
    runtime.countAnswer(read.key, callers);
    if (runtime.readListeners.length > 0) {
      const durationMs = elapsedMs(read.startedAt);
      runtime.emitRead({ type: 'read', key: read.key, path, negative, durationMs }, callers);
    }
    return read.wants === 'value' ? entry.value : toResult(entry, path, revalidated);
  }
}

/** Milliseconds since `startedAt` (`performance.now()`), or 0 when it was not taken. */
function elapsedMs(startedAt: number): number {
  return startedAt === 0 ? 0 : performance.now() - startedAt;
}

/** Why a caller that had a stale value in hand gets it instead of an error. */
function staleReason(
  error: unknown,
): 'loader-failed' | 'loader-timeout' | 'wait-timeout' | 'store-down' {
  if (error instanceof LoaderTimeoutError || error instanceof WaitTimeoutError)
    return 'loader-timeout';
  if (error instanceof UpstreamUnavailableError) return 'wait-timeout';
  if (error instanceof StoreError) return 'store-down';
  return 'loader-failed';
}
