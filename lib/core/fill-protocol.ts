import { ClosedError } from '../errors/closed.error.js';
import { HerdGuardError } from '../errors/herd-guard.error.js';
import { LoaderFailedError } from '../errors/loader-failed.error.js';
import { isLoaderFailure } from '../errors/loader-failure.js';
import { LoadFencedError } from '../errors/load-fenced.error.js';
import { LoaderTimeoutError } from '../errors/loader-timeout.error.js';
import { SerializationError } from '../errors/serialization.error.js';
import { UpstreamUnavailableError } from '../errors/upstream-unavailable.error.js';
import { assertTags } from '../keys/valid-key.js';
import { Backoff } from './backoff.js';
import type { EngineRuntime } from './engine-runtime.js';
import {
  type Entry,
  isFresh,
  isNegative,
  isNewer,
  isServable,
  newEntry,
  newestServable,
} from './entry.js';
import type { Fill, FillRequest } from './fill.js';
import type { FillWatch, Lease } from './herd-store.interface.js';
import { type LoadChoice, LoadChoices } from './load-choices.js';
import { LoadDurations, MIN_STUCK_MS } from './load-durations.js';
import { LoadScope } from './load-scope.js';
import type { LoadContext } from './loader.js';
import { type ResolvedPolicy, maxLifetimeMs } from './policy.js';
import { storable } from './serializers.js';

/**
 * A follower re-checks the store at least this often: a lost notification costs at most this long.
 */
export const RECHECK_INTERVAL_MS = 250;

/** The shortest wait before extending a lease again after an extension failed. */
const MIN_EXTEND_RETRY_MS = 50;

/** What a loader returned, what it read from the cache, and how it chose to cache its value. */
interface LoadedValue<T> {
  readonly value: T;
  readonly scope: LoadScope;
  readonly choice: LoadChoice;
}

type LeaseOutcome =
  | { readonly kind: 'owner'; readonly lease: Lease; readonly current: Entry | undefined }
  | { readonly kind: 'contended'; readonly current: Entry | undefined; readonly version: number }
  | { readonly kind: 'unreachable' };

/**
 * The fill and lease protocol: one fill of a key per process at a time (inside its flight) takes
 * the cluster-wide lease and loads, or settles for what another process's fill produces. The lease
 * is released (or held for the backoff) in the one `finally` of {@link #load}; whether the value is
 * stored is the store's verdict (the fence), never decided here.
 */
export class FillProtocol {
  readonly #runtime: EngineRuntime;
  /** Removes a key (and the values derived from it) whose loader answered that it is gone. */
  readonly #onGone: (key: string) => Promise<unknown>;
  /**
   * Keys whose loads failed recently: no refresh is tried before their delay (see `backingOff`).
   */
  readonly #backoff: Backoff;
  /** Fills running, superseded ones included; `settled()` waits for them. */
  readonly #fills = new Set<Promise<Fill>>();
  /** Fill watches of followers; `stop()` ends their waits. */
  readonly #watches = new Set<FillWatch>();
  /** One per running loader; `stop()` aborts them. */
  readonly #loaders = new Map<AbortController, string>();
  /** How long loads of each key usually take: when a lease holder counts as stuck. */
  readonly #durations = new LoadDurations();

  constructor(runtime: EngineRuntime, onGone: (key: string) => Promise<unknown>) {
    this.#runtime = runtime;
    this.#onGone = onGone;
    this.#backoff = new Backoff(runtime.random);
  }

  run<T>(request: FillRequest<T>): Promise<Fill> {
    const fills = this.#fills;
    const durations = this.#durations;
    const { key } = request;
    if (request.stale !== undefined) durations.record(key, request.stale);
    const { tracer } = this.#runtime;
    const running =
      tracer === undefined
        ? this.#run(request)
        : tracer.fill(key, request.mode, () => this.#run(request));
    fills.add(running);
    const settled = (): void => {
      fills.delete(running);
    };
    running.then((fill) => {
      settled();
      durations.record(key, fill.entry);
    }, settled);
    return running;
  }

  /**
   * True while `key`, seen at `version`, backs off after a failed load: a refresh would fail again.
   */
  backingOff(key: string, version: number): boolean {
    return this.#backoff.isBackingOff(key, this.#runtime.now(), version);
  }

  /** Fills in progress (a fill overtaken by an invalidation counts until it ends). */
  running(): number {
    return this.#fills.size;
  }

  /** Loaders running now. */
  loading(): number {
    return this.#loaders.size;
  }

  /**
   * For `close()`: aborts the running loaders and ends followers' waits (then their fills stop).
   */
  stop(): void {
    for (const [loader, key] of this.#loaders) loader.abort(new ClosedError(key));
    for (const watch of this.#watches) watch.close();
  }

  /** Resolves once every fill running now has ended. */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.#fills]);
  }

  async #run<T>(request: FillRequest<T>): Promise<Fill> {
    const { key, policy } = request;
    const runtime = this.#runtime;
    // Watch before the lease attempt, so a fill landing in between is not missed.
    const watch = runtime.store.watchFill(key);
    this.#watches.add(watch);
    try {
      const waitStartedAt = performance.now();
      const giveUpAt = waitStartedAt + 2 * policy.waitTimeoutMs;
      let waiting = false;
      /**
       * The version of the lease holder being waited for, and since when (each holder gets
       * waitTimeout).
       */
      let holder: { version: number; since: number } | undefined;
      /**
       * Set when the holder made no progress within waitTimeout: the next attempt takes its lease
       * over.
       */
      let takeoverFrom: number | undefined;
      /**
       * The holder a takeover was tried from (once per holder; a rescuer is not taken over as
       * stuck).
       */
      let triedFrom: number | undefined;
      for (;;) {
        // A fill still running when the engine closed must not start a load (or take a lease).
        if (runtime.closed) throw new ClosedError(key);
        let outcome = await this.#tryLease(request, takeoverFrom);
        takeoverFrom = undefined;
        if (outcome.kind === 'unreachable') {
          // Check: nothing to coordinate with, so load here (coalesced in this process only).
          // Unless
          // a holder was seen and the store is not deemed down: one failed re-check (a slow reply)
          // is no reason to load beside a holder that may well be loading.
          if (holder === undefined || runtime.store.health().breaker === 'open') {
            return await this.#load(request, undefined, undefined);
          }
          outcome = { kind: 'contended', current: undefined, version: holder.version };
        }
        // Lock: this caller owns the fill.
        if (outcome.kind === 'owner')
          return await this.#load(request, outcome.lease, outcome.current);
        // Contended: someone else loads. Settle for what this request accepts, or wait for the
        // fill.
        runtime.emit({ type: 'lease-contended', key });
        const usable = this.#usable(request, outcome.current);
        if (usable !== undefined) return { entry: usable, loaded: false };
        if (!waiting) runtime.emit({ type: 'wait', key });
        waiting = true;
        const now = performance.now();
        if (holder?.version !== outcome.version) holder = { version: outcome.version, since: now };
        if (now >= giveUpAt) return await this.#onWaitTimeout(request, now - waitStartedAt);
        // A holder is stuck once it loads far longer than loads of this key usually take (at most
        // waitTimeout, see LoadDurations).
        const stuckAt = holder.since + this.#durations.stuckAfterMs(key, policy.waitTimeoutMs);
        if (now >= stuckAt && triedFrom !== holder.version) {
          // The holder is stuck: take its lease over. The compare-and-set on its version lets one
          // caller in the cluster win; the others then wait for that one, and a lease taken over
          // this way is not taken over again (a slow load is replaced once).
          takeoverFrom = triedFrom = holder.version;
          continue;
        }
        // The owner's notification wakes us; the store is re-checked anyway (a notification is a
        // hint).
        const nextDeadline = triedFrom === holder.version ? giveUpAt : stuckAt;
        const timeoutMs = Math.min(nextDeadline - now, policy.leaseTtlMs, RECHECK_INTERVAL_MS);
        if (await watch.next(timeoutMs)) {
          const seen = await runtime.storeGet(key);
          // An answer older than what the store already told this fill is a copy that a late
          // notification brought (or a fallback): not the fill being waited for.
          const filled =
            seen.version < request.cell.version
              ? undefined
              : this.#usable(request, runtime.decoded(key, seen.entry));
          if (filled !== undefined) return { entry: filled, loaded: false };
        }
        // Try for the lease again: the owner failed, gave up, or died and its lease expired.
      }
    } finally {
      watch.close();
      this.#watches.delete(watch);
    }
  }

  /**
   * Loads as the lease owner (or without a lease when the store is unreachable), then stores the
   * value, releases the lease and wakes followers in one store step. The lease is released or held
   * for the backoff in the one `finally` below.
   */
  async #load<T>(
    request: FillRequest<T>,
    lease: Lease | undefined,
    current: Entry | undefined,
  ): Promise<Fill> {
    const { key, policy } = request;
    const runtime = this.#runtime;
    // The fail-safe value: what this caller had, or what the store held when the lease was taken.
    const stale = newestServable(request.stale, current, runtime.now());
    let leaseSettled = false;
    let holdLeaseMs = 0;
    const controller = new AbortController();
    // A value a later load stores (a takeover of this one, deemed stuck) answers this fill's
    // callers at once, whether or not this loader ever ends.
    const replacement =
      lease === undefined ? undefined : this.#replacementOf(key, lease.fence, policy);
    // A refresh nobody waits for stops when its lease is lost: its value could not be stored.
    const onLost = (): void => {
      replacement?.leaseLost();
      if (request.mode === 'background') controller.abort(new LoadFencedError(key));
    };
    const keepAlive = lease === undefined ? undefined : this.#keepLeaseAlive(lease, policy, onLost);
    try {
      if (lease !== undefined) runtime.emit({ type: 'lease-acquired', key, fence: lease.fence });
      // Re-check: another process may have refreshed the key between our read and our lease.
      if (current !== undefined && this.#spares(request, current)) {
        return { entry: current, loaded: false };
      }
      // Index the key under its tags first: a tag invalidated while the loader runs then fences it.
      const indexed = await this.#indexTags(key, request.tags, policy);
      const loadStartedAt = runtime.now();
      // For ordering against invalidations: monotonic, whatever the wall clock does meanwhile.
      const loadStartedAtMonotonic = performance.now();
      let loaded: LoadedValue<T>;
      try {
        const running = this.#runLoader(request, stale, lease, controller);
        const first =
          replacement === undefined ? running : Promise.race([running, replacement.found]);
        const outcome = await first;
        replacement?.stop();
        if (outcome === undefined) {
          // The watch ended first (the engine is closing): the loader's outcome decides.
          loaded = await running;
        } else if (!('scope' in outcome)) {
          // Replaced: this load's value could not be stored any more; its loader is told to stop.
          controller.abort(new LoadFencedError(key));
          runtime.emit({ type: 'load-fenced', key, background: request.mode === 'background' });
          return { entry: outcome, loaded: false };
        } else loaded = outcome;
      } catch (error) {
        // Stopped by close() or fenced: not the loader's failure, and nothing to back off from.
        if (error instanceof ClosedError && runtime.closed) throw error;
        if (error instanceof LoadFencedError) {
          runtime.emit({ type: 'load-fenced', key, background: true });
          throw error;
        }
        runtime.emit({
          type: 'load-failed',
          key,
          durationMs: runtime.now() - loadStartedAt,
          background: request.mode === 'background',
          error,
        });
        // A client error (a 404, a 403) is the loader's answer, not an outage: the stale value must
        // not outlive it (no fail-safe, no backoff), so the key goes, with what was derived from
        // it.
        if (!isLoaderFailure(error)) {
          if (stale !== undefined) runtime.track(this.#onGone(key), 'delete', key);
          throw error instanceof HerdGuardError ? error : new LoaderFailedError(key, error);
        }
        // On error: serve stale (fail-safe) and back off, or throw.
        const now = runtime.now();
        if (stale !== undefined && isServable(stale, now)) {
          const { delayMs, failures } = this.#backoff.recordFailure(
            key,
            now,
            lease?.fence ?? request.cell.version,
            {
              initialMs: policy.backoffInitialMs,
              maxMs: policy.backoffMaxMs,
            },
          );
          runtime.emit({ type: 'backoff', key, delayMs, failures });
          runtime.emit({
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
      // What the loader chose from its value: TTLs, tags, not to store it, or to keep the stale one.
      const { choice } = loaded;
      const chosen = choice.policy;
      // A value shared without its tag index would escape tag invalidation: write it once more,
      // else store the value stale. (One loaded without a lease is never shared.)
      const lateTags =
        lease !== undefined && choice.cache ? this.#tagsToIndex(request, choice, indexed) : [];
      const unindexed = !(await this.#indexTags(key, lateTags, chosen));
      // An invalidation of a tag recorded only now did not find this key: if one came since the
      // load began, the value may predate it and is not stored.
      const missed =
        !unindexed && (await this.#invalidatedWhileLoading(key, lateTags, loadStartedAtMonotonic));
      const now = runtime.now();
      const version = lease?.fence ?? request.cell.version;
      // What every pod will read back (this one too): a value that cannot be stored fails here.
      const value = storable(
        key,
        choice.unchanged === undefined ? loaded.value : choice.unchanged.value,
        chosen.serializer,
      );
      const { random } = runtime;
      const entry = newEntry({
        value,
        policy: chosen,
        random,
        loadStartedAt,
        now,
        version,
        tags: choice.tags,
        inputs: loaded.scope.boundsFor(maxLifetimeMs(chosen), loadStartedAt),
        unindexed,
      });
      this.#backoff.recordSuccess(key);
      // Store (if the fence still holds), release and wake followers in one store step.
      let stored = false;
      if (missed) {
        runtime.emit({ type: 'load-fenced', key, background: request.mode === 'background' });
        // The value this load was to replace (a refresh's) may be superseded too: not fresh any more.
        if (stale !== undefined) await this.#expireAfterMissed(key);
      } else if (choice.cache && (!isNegative(entry) || chosen.negativeTtlMs > 0)) {
        const outcome = await this.#store(key, entry, lease);
        leaseSettled = outcome !== 'failed';
        stored = outcome === 'stored' && lease !== undefined;
        if (outcome === 'fenced')
          runtime.emit({ type: 'load-fenced', key, background: request.mode === 'background' });
      }
      runtime.emit({
        type: 'load-ok',
        key,
        durationMs: entry.loadMs,
        background: request.mode === 'background',
        negative: isNegative(entry),
      });
      return { entry, loaded: true, stored };
    } finally {
      keepAlive?.stop();
      replacement?.stop();
      if (lease !== undefined && !leaseSettled) {
        runtime.track(
          holdLeaseMs > 0
            ? runtime.store.extendLease(lease, holdLeaseMs)
            : runtime.store.releaseLease(lease),
          'release-lease',
          key,
        );
      }
    }
  }

  /**
   * The tags to record (again) once the loader chose: those it added, and all of them when they
   * were not recorded before the load or the loader made the value outlive their records.
   */
  #tagsToIndex<T>(request: FillRequest<T>, choice: LoadChoice, indexed: boolean): string[] {
    const all = choice.tags ?? [];
    if (!indexed || maxLifetimeMs(choice.policy) > maxLifetimeMs(request.policy)) return [...all];
    const before = new Set(request.tags);
    return all.filter((tag) => !before.has(tag));
  }

  /**
   * Whether a tag recorded only once the load ended (`tags`) was invalidated since the load began
   * (`startedAt`, `performance.now()`): that invalidation did not find the key. A store that cannot
   * tell answers no; one that fails to answer counts as yes (nothing that may be superseded is
   * shared).
   */
  async #invalidatedWhileLoading(
    key: string,
    tags: readonly string[],
    startedAt: number,
  ): Promise<boolean> {
    const runtime = this.#runtime;
    const { store } = runtime;
    if (tags.length === 0 || store.invalidatedWithin === undefined) return false;
    const withinMs = performance.now() - startedAt;
    try {
      const found = await Promise.all(
        tags.map((tag) => store.invalidatedWithin?.({ tag }, withinMs)),
      );
      return found.includes(true);
    } catch (error) {
      runtime.emit({ type: 'store-error', operation: 'tag-invalidated', key, error });
      return true;
    }
  }

  /** Marks `key` stale after a load it could not store (see {@link #invalidatedWhileLoading}). */
  async #expireAfterMissed(key: string): Promise<void> {
    try {
      await this.#runtime.store.invalidate(key, 'stale');
    } catch (error) {
      this.#runtime.emit({ type: 'store-error', operation: 'invalidate', key, error });
    }
  }

  /**
   * Hands a loaded value to the store, whose fence decides: `stored`, `fenced` (not written), or
   * `failed`. A value loaded without a lease is only offered (never shared), so never fenced.
   */
  async #store(
    key: string,
    entry: Entry,
    lease: Lease | undefined,
  ): Promise<'stored' | 'fenced' | 'failed'> {
    try {
      const written = await this.#runtime.store.fill(key, entry, lease);
      return written || lease === undefined ? 'stored' : 'fenced';
    } catch (error) {
      if (error instanceof SerializationError) throw error;
      this.#runtime.emit({ type: 'store-error', operation: 'fill', key, error });
      return 'failed';
    }
  }

  /**
   * Runs the loader with its context, inside a scope that records what it reads from this cache.
   * Rejects with LoaderTimeoutError after `loaderHardTimeout`.
   */
  #runLoader<T>(
    request: FillRequest<T>,
    stale: Entry | undefined,
    lease: Lease | undefined,
    controller: AbortController,
  ): Promise<LoadedValue<T>> {
    const { key, loader, policy } = request;
    const runtime = this.#runtime;
    const loaders = this.#loaders;
    if (runtime.closed) return Promise.reject(new ClosedError(key));
    loaders.set(controller, key);
    const timeoutMs = policy.loaderHardTimeoutMs;
    const timer =
      timeoutMs === undefined
        ? undefined
        : setTimeout(() => controller.abort(new LoaderTimeoutError(key, timeoutMs)), timeoutMs);
    const choices = new LoadChoices(key, policy, stale);
    const context: LoadContext<T> = {
      key,
      signal: controller.signal,
      fence: lease?.fence,
      stale: stale?.value as T | undefined,
      setPolicy: (chosen) => choices.setPolicy(chosen),
      doNotCache: () => choices.doNotCache(),
      unchanged: () => choices.unchanged() as T,
    };
    const scope = new LoadScope(
      key,
      runtime.scopes.current(),
      maxLifetimeMs(policy),
      context as LoadContext<unknown>,
    );
    const aborted = new Promise<never>((_, reject) => {
      controller.signal.addEventListener('abort', () => reject(controller.signal.reason), {
        once: true,
      });
    });
    let value: Promise<T>;
    let endScope = (): void => undefined;
    try {
      const { tracer } = runtime;
      const started = runtime.scopes.start(scope, () =>
        tracer === undefined ? loader(context) : tracer.loader(key, () => loader(context)),
      );
      endScope = started.end;
      value = Promise.resolve(started.result);
    } catch (error) {
      value = Promise.reject(error);
    }
    // A loader that ignores its signal is abandoned, not awaited.
    return Promise.race([value, aborted])
      .then((loaded) => {
        choices.close();
        return { value: loaded, scope, choice: choices.resolve(request.tags) };
      })
      .finally(() => {
        choices.close();
        endScope();
        if (timer !== undefined) clearTimeout(timer);
        loaders.delete(controller);
      });
  }

  /**
   * Watches, while this process loads `key` under the lease of `fence`, for a value a later load
   * stored: `found` resolves with it, fresh and at a newer version than the fence (the store's word
   * for the key, as a follower would read it), or with `undefined` once stopped. Only once this
   * load has run long enough that a follower may deem it stuck ({@link MIN_STUCK_MS}, or
   * `waitTimeout` if shorter): a follower's takeover then answers this process's callers too,
   * whether or not this loader ever ends, while a load overtaken sooner (a `refresh()`) still
   * answers its own callers with its own value. Woken by the key's notifications; once the lease is
   * known lost, the store is also re-checked every {@link RECHECK_INTERVAL_MS} (notifications are
   * hints).
   */
  #replacementOf(
    key: string,
    fence: number,
    policy: ResolvedPolicy,
  ): { readonly found: Promise<Entry | undefined>; leaseLost(): void; stop(): void } {
    const runtime = this.#runtime;
    const watch = runtime.store.watchFill(key);
    const eligibleAt = performance.now() + Math.min(MIN_STUCK_MS, policy.waitTimeoutMs);
    let lost = false;
    let stopped = false;
    const found = (async (): Promise<Entry | undefined> => {
      /** Something may have changed since the last look: a notification, or the lease lost. */
      let due = false;
      for (;;) {
        const leftMs = eligibleAt - performance.now();
        const woken = await watch.next(leftMs > 0 ? leftMs : RECHECK_INTERVAL_MS);
        if (stopped || runtime.closed) return undefined;
        due ||= woken || lost;
        if (!due || performance.now() < eligibleAt) continue;
        due = false;
        const seen = await runtime.storeGet(key);
        if (stopped) return undefined;
        const entry = seen.version > fence ? runtime.decoded(key, seen.entry) : undefined;
        if (entry !== undefined && entry.version > fence && isFresh(entry, runtime.now()))
          return entry;
      }
    })();
    return {
      found,
      leaseLost: () => {
        lost = true;
      },
      stop: () => {
        stopped = true;
        watch.close();
      },
    };
  }

  /** Nobody filled the key within `waitTimeout`: apply `onWaitTimeout`. */
  async #onWaitTimeout<T>(request: FillRequest<T>, waitedMs: number): Promise<Fill> {
    this.#runtime.emit({ type: 'wait-timeout', key: request.key, waitedMs });
    if (request.policy.onWaitTimeout === 'load') return this.#load(request, undefined, undefined);
    throw new UpstreamUnavailableError(request.key, waitedMs);
  }

  /**
   * One lease attempt; `refresh()` (and a follower whose wait timed out) takes over from a version.
   */
  async #tryLease<T>(
    request: FillRequest<T>,
    takeoverAfterWait: number | undefined,
  ): Promise<LeaseOutcome> {
    const { key, policy, cell } = request;
    const forced = request.mode === 'forced';
    const takeoverFrom = forced ? request.fromVersion : takeoverAfterWait;
    try {
      const runtime = this.#runtime;
      const attempt = await runtime.store.acquireLease(key, policy.leaseTtlMs, {
        takeoverFrom,
        takeover: forced ? 'forced' : 'stuck',
      });
      const { lease, current } = attempt;
      // The flight now reflects at least this version: callers that saw it may join.
      cell.learn(current.version);
      if (attempt.repaired === true) runtime.emit({ type: 'corrupt-entry', key });
      if (lease !== undefined && takeoverAfterWait !== undefined && !forced)
        runtime.emit({ type: 'lease-takeover', key });
      const entry = runtime.decoded(key, current.entry);
      if (lease === undefined)
        return { kind: 'contended', current: entry, version: current.version };
      return { kind: 'owner', lease, current: entry };
    } catch (error) {
      this.#runtime.emit({ type: 'store-error', operation: 'acquire-lease', key, error });
      cell.learn(cell.version);
      return { kind: 'unreachable' };
    }
  }

  /**
   * Whether `current`, what the store held when the lease was granted, spares this fill its load:
   * fresh, and newer than the value the request refreshes, or that very version taken as stale
   * (only because the store could not be asked then: its copy answered as stale), which a load
   * would replace with nothing newer. An early refresh of a fresh value still loads; `warm` takes
   * only a newer value, and `forced` always loads.
   */
  #spares<T>(request: FillRequest<T>, current: Entry): boolean {
    const { mode, stale } = request;
    const now = this.#runtime.now();
    if (mode === 'forced' || !isFresh(current, now)) return false;
    if (isNewer(current, stale)) return true;
    return mode !== 'warm' && current.version === stale?.version && !isFresh(stale, now);
  }

  /** What a fill may hand back instead of loading, while another process holds the lease. */
  #usable<T>(request: FillRequest<T>, current: Entry | undefined): Entry | undefined {
    const now = this.#runtime.now();
    switch (request.mode) {
      case 'miss':
      case 'background':
        return newestServable(request.stale, current, now);
      case 'input':
        return current !== undefined && isFresh(current, now) ? current : undefined;
      case 'forced':
      case 'warm':
        return current !== undefined &&
          isFresh(current, now) &&
          current.version > request.fromVersion
          ? current
          : undefined;
    }
  }

  /**
   * Records the key under each tag until its value could expire, before it is loaded. Resolves
   * whether it was recorded (a failure is reported).
   */
  async #indexTags(
    key: string,
    tags: readonly string[] | undefined,
    policy: ResolvedPolicy,
  ): Promise<boolean> {
    if (tags === undefined || tags.length === 0) return true;
    assertTags(tags);
    const ttlMs = maxLifetimeMs(policy);
    try {
      await Promise.all(tags.map((tag) => this.#runtime.store.addToIndex({ tag }, key, ttlMs)));
      return true;
    } catch (error) {
      this.#runtime.emit({ type: 'store-error', operation: 'index-tag', key, error });
      return false;
    }
  }

  /**
   * Extends the lease while the loader runs, so a slow load does not let a second loader in: every
   * third of its time to live, until the loader ends (at the latest when `loaderHardTimeout` aborts
   * it). A holder that keeps its lease but loads far longer than the key usually takes is taken over
   * once by a waiting follower (see `#run`); when the lease is lost, `onLost` runs.
   */
  #keepLeaseAlive(lease: Lease, policy: ResolvedPolicy, onLost: () => void): { stop(): void } {
    const runtime = this.#runtime;
    let timer: NodeJS.Timeout | undefined;
    /** When the lease lapses unless extended (from the last request that extended it). */
    let expiresAt = performance.now() + lease.ttlMs;
    const schedule = (delayMs: number): void => {
      timer = setTimeout(extend, Math.max(1, Math.floor(delayMs)));
    };
    const extend = (): void => {
      const sentAt = performance.now();
      runtime.store.extendLease(lease, policy.leaseTtlMs).then(
        (kept) => {
          if (timer === undefined) return;
          if (!kept) {
            runtime.emit({ type: 'lease-lost', key: lease.key });
            return onLost();
          }
          expiresAt = sentAt + policy.leaseTtlMs;
          schedule(policy.leaseTtlMs / 3);
        },
        (error: unknown) => {
          runtime.emit({ type: 'store-error', operation: 'extend-lease', key: lease.key, error });
          if (timer === undefined) return;
          // Try again while the lease still holds (a short fault must not let a second loader in).
          const leftMs = expiresAt - performance.now();
          schedule(leftMs > 0 ? Math.max(MIN_EXTEND_RETRY_MS, leftMs / 3) : policy.leaseTtlMs / 3);
        },
      );
    };
    schedule(lease.ttlMs / 3);
    return {
      stop: () => {
        clearTimeout(timer);
        timer = undefined;
      },
    };
  }
}
