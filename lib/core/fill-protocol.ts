import { ClosedError } from '../errors/closed.error.js';
import { HerdGuardError } from '../errors/herd-guard.error.js';
import { LoaderFailedError } from '../errors/loader-failed.error.js';
import { isLoaderFailure, isPerCallerAnswer } from '../errors/loader-failure.js';
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
import { Hedges } from './hedge-budget.js';
import {
  type FillWatch,
  type Lease,
  type LeaseEnd,
  type LoadOutcome,
  passLease,
  type SharedFailure,
} from './herd-store.interface.js';
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

/** The hedge a takeover of a holder that outlasted the whole waitTimeout is, whatever the budget. */
const PAST_WAIT_TIMEOUT = 'past-wait-timeout';
/** A follower the hedge budget refused asks again after this long. */
const HEDGE_ASK_AGAIN_MS = 1_000;

/**
 * The longest a pass (hit-for-miss) holds: the policy's soft TTL, at most this (Varnish's built-in
 * hit-for-miss lasts 2 minutes).
 */
export const PASS_MAX_MS = 120_000;

/** The longest loader error message shared with the cluster. */
const SHARED_MESSAGE_MAX = 1_000;

/** What a loader returned, what it read from the cache, and how it chose to cache its value. */
interface LoadedValue<T> {
  readonly value: T;
  readonly scope: LoadScope;
  readonly choice: LoadChoice;
}

type LeaseTry =
  | {
      readonly kind: 'owner';
      readonly lease: Lease;
      readonly current: Entry | undefined;
      /** Failures of the key's loads recorded before this grant (see LeaseAttempt.outcome). */
      readonly failures: number;
    }
  | {
      readonly kind: 'contended';
      readonly current: Entry | undefined;
      readonly version: number;
      /** How the key's last load ended, held in its lease's place. */
      readonly outcome?: LoadOutcome;
    }
  | { readonly kind: 'unreachable' };

/** A lease a fill was granted, and what came with it. */
interface Grant {
  readonly lease: Lease;
  /** What the key held when the lease was granted. */
  readonly current: Entry | undefined;
  /** Failures of the key's loads recorded before this grant, cluster-wide. */
  readonly failures: number;
  /** The hedge this load is (a takeover of a holder deemed stuck). */
  readonly hedge: string | undefined;
}

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
  /** Loads running, one answered early included (see `#load`); `settled()` waits for them too. */
  readonly #loads = new Set<Promise<Fill>>();
  /** Fill watches of followers; `stop()` ends their waits. */
  readonly #watches = new Set<FillWatch>();
  /** One per running loader; `stop()` aborts them. */
  readonly #loaders = new Map<AbortController, string>();
  /** How long loads of each key usually take: when a lease holder counts as stuck. */
  readonly #durations = new LoadDurations();
  /** The budget takeovers of stuck holders run under. */
  readonly #hedges: Hedges;

  constructor(runtime: EngineRuntime, onGone: (key: string) => Promise<unknown>) {
    this.#runtime = runtime;
    this.#onGone = onGone;
    this.#backoff = new Backoff(runtime.random);
    this.#hedges = new Hedges(runtime, () => this.#loaders.size);
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
    await Promise.allSettled([...this.#fills, ...this.#loads]);
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
       * Set when the holder is deemed stuck: the next attempt takes its lease over, as the hedge
       * `hedge` the budget granted (or {@link PAST_WAIT_TIMEOUT}, without the budget's word).
       */
      let takeover: { from: number; hedge: string } | undefined;
      /**
       * The holder a takeover was tried from (once per holder; a rescuer is not taken over as
       * stuck).
       */
      let triedFrom: number | undefined;
      /** When the hedge budget, having refused, is asked again. */
      let hedgeAskAt = 0;
      for (;;) {
        // A fill still running when the engine closed must not start a load (or take a lease).
        if (runtime.closed) throw new ClosedError(key);
        let outcome = await this.#tryLease(request, takeover?.from);
        const hedge = takeover?.hedge;
        takeover = undefined;
        if (outcome.kind === 'unreachable') {
          // Check: nothing to coordinate with, so load here (coalesced in this process only).
          // Unless a holder was seen and the store is not deemed down: one failed re-check (a slow
          // reply) is no reason to load beside a holder that may well be loading.
          if (holder === undefined || runtime.store.health().breaker === 'open') {
            return await this.#load(request, undefined);
          }
          outcome = { kind: 'contended', current: undefined, version: holder.version };
        }
        // Lock: this caller owns the fill.
        if (outcome.kind === 'owner') {
          const { lease, current, failures } = outcome;
          return await this.#load(request, { lease, current, failures, hedge });
        }
        // Contended: someone else loads. Settle for what this request accepts, or wait for the
        // fill.
        runtime.emit({ type: 'lease-contended', key });
        const usable = this.#usable(request, outcome.current);
        if (usable !== undefined) return { entry: usable, loaded: false };
        // The key's last load ended without a value to store: take its answer, or load beside.
        const after = this.#afterOutcome(request, outcome.outcome, waiting);
        if (after !== undefined) return await after;
        if (!waiting) runtime.emit({ type: 'wait', key });
        waiting = true;
        const now = performance.now();
        if (holder?.version !== outcome.version) holder = { version: outcome.version, since: now };
        if (now >= giveUpAt) return await this.#onWaitTimeout(request, now - waitStartedAt);
        // A holder is stuck once it loads far longer than loads of this key usually take (at most
        // waitTimeout, see LoadDurations).
        const stuckAt = holder.since + this.#durations.stuckAfterMs(key, policy.waitTimeoutMs);
        if (now >= stuckAt && triedFrom !== holder.version && now >= hedgeAskAt) {
          // The holder is stuck: take its lease over, if the hedge budget allows (a backend slow for
          // every key spends it at once). The compare-and-set on its version lets one caller in the
          // cluster win; the others then wait for that one, and a lease taken over this way is not
          // taken over again (a slow load is replaced once).
          // A holder that outlasts the whole waitTimeout is taken over in any case, as it was
          // before takeovers had a budget: a second hung key is not left to its waiters' timeout.
          const granted =
            (await this.#hedges.take(key)) ??
            (now - holder.since >= policy.waitTimeoutMs ? PAST_WAIT_TIMEOUT : undefined);
          if (granted !== undefined) {
            takeover = { from: holder.version, hedge: granted };
            triedFrom = holder.version;
            continue;
          }
          hedgeAskAt = Math.min(now + HEDGE_ASK_AGAIN_MS, holder.since + policy.waitTimeoutMs);
        }
        // The owner's notification wakes us; the store is re-checked anyway (a notification is a
        // hint).
        const nextDeadline =
          triedFrom === holder.version ? giveUpAt : Math.max(stuckAt, hedgeAskAt);
        const timeoutMs = Math.max(
          1,
          Math.min(nextDeadline - now, policy.leaseTtlMs, RECHECK_INTERVAL_MS),
        );
        if (await watch.next(timeoutMs)) {
          const seen = await runtime.storeGet(key);
          // An answer older than what the store already told this fill is a copy that a late
          // notification brought (or a fallback): not the fill being waited for.
          if (seen.version >= request.cell.version) {
            const filled = this.#usable(request, runtime.decoded(key, seen.entry));
            if (filled !== undefined) return { entry: filled, loaded: false };
            const after = this.#afterOutcome(request, seen.outcome, true);
            if (after !== undefined) return await after;
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
   * Loads as the lease owner (`grant`), or without a lease: when the store is unreachable (for this
   * process alone), or `beside` a `pass` outcome (whose place a value that may be cached takes, if
   * it is still held). Then stores the value, releases the lease and wakes followers in one store
   * step. A load that stores nothing leaves how it ended in its lease's place (a pass, or a failure
   * held for the backoff), so every process learns it at once. The lease is given back in the one
   * `finally` below.
   */
  #load<T>(request: FillRequest<T>, grant: Grant | undefined, beside?: Lease): Promise<Fill> {
    let answer!: { resolve: (fill: Fill) => void; reject: (error: unknown) => void };
    const answered = new Promise<Fill>((resolve, reject) => {
      answer = { resolve, reject };
    });
    // Answered by the load, or earlier by another load's failure (the load then goes on).
    const work = this.#loadAndStore(request, grant, beside, answer.reject);
    work.then(answer.resolve, answer.reject);
    const loads = this.#loads;
    loads.add(work);
    const ended = (): void => {
      loads.delete(work);
    };
    work.then(ended, ended);
    return answered;
  }

  async #loadAndStore<T>(
    request: FillRequest<T>,
    grant: Grant | undefined,
    beside: Lease | undefined,
    answerEarly: (error: unknown) => void,
  ): Promise<Fill> {
    const { key, policy } = request;
    const runtime = this.#runtime;
    const lease = grant?.lease;
    /** What the value is stored with. */
    const writer = lease ?? beside;
    // The fail-safe value: what the store held when the lease was granted (a value deleted or
    // cleared since this caller read it is gone), or, without the store's word, what the caller had.
    const stale =
      grant === undefined ? request.stale : newestServable(grant.current, undefined, runtime.now());
    let leaseSettled = false;
    /** How this load ended when it stored nothing, left in the lease's place. */
    let ended: LeaseEnd | undefined;
    const controller = new AbortController();
    // A value another load stores answers this fill's callers at once, whether or not this loader
    // ever ends: a takeover of this load (deemed stuck), or, for a takeover, the holder it
    // replaced, whichever lands first.
    const replacement =
      lease === undefined ? undefined : this.#replacementOf(key, lease, policy, grant?.hedge);
    // A refresh nobody waits for stops when its lease is lost: its value could not be stored.
    const onLost = (): void => {
      replacement?.leaseLost();
      if (request.mode === 'background') controller.abort(new LoadFencedError(key));
    };
    const keepAlive = lease === undefined ? undefined : this.#keepLeaseAlive(lease, policy, onLost);
    try {
      if (lease !== undefined) runtime.emit({ type: 'lease-acquired', key, fence: lease.fence });
      // Re-check: another process may have refreshed the key between our read and our lease.
      const current = grant?.current;
      if (current !== undefined && this.#spares(request, current)) {
        return { entry: current, loaded: false };
      }
      // Index the key under its tags first: a tag invalidated while the loader runs then fences it.
      const indexed = await this.#indexTags(key, request.tags, policy);
      const loadStartedAt = runtime.now();
      // For ordering against invalidations: monotonic, whatever the wall clock does meanwhile.
      const loadStartedAtMonotonic = performance.now();
      let loaded: LoadedValue<T> | undefined;
      /** The value another load answered first with (see #replacementOf). */
      let replaced: Entry | undefined;
      /** The loaded value as stored (see `storable`). */
      let value: unknown;
      try {
        const running = this.#runLoader(request, stale, lease, controller);
        const first =
          replacement === undefined ? running : Promise.race([running, replacement.found]);
        const outcome = await first;
        replacement?.stop();
        if (outcome === undefined) {
          // The watch ended first (the engine is closing): the loader's outcome decides.
          loaded = await running;
        } else if ('scope' in outcome) loaded = outcome;
        else if ('kind' in outcome && outcome.kind === 'failed') {
          // The holder this takeover replaced failed first: its failure answers this load's callers
          // at once (one answer releases every waiter), and this loader goes on: a value it loads
          // replaces the failure. (A refresh() or warm() waits for its own load: it invalidates
          // what was derived from the key once that value is stored.)
          if (request.mode !== 'forced' && request.mode !== 'warm')
            answerEarly(sharedFailure(key, outcome.failure));
          loaded = await running;
        } else {
          // Replaced: this load's value could not be stored any more; its loader is told to stop.
          controller.abort(new LoadFencedError(key));
          runtime.emit({ type: 'load-fenced', key, background: request.mode === 'background' });
          replaced = 'kind' in outcome ? outcome.entry : outcome;
        }
        // What every pod will read back (this one too): a value that cannot be stored fails here,
        // as the loader's failure (every pod would fail alike). Kept unchanged, the value the store
        // holds: never what a caller made of the copy it was handed.
        if (loaded !== undefined) {
          const { choice } = loaded;
          value = storable(
            key,
            choice.unchanged === undefined
              ? loaded.value
              : (await this.#asStored(key, choice.unchanged)).value,
            choice.policy.serializer,
          );
        }
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
        const version = lease?.fence ?? request.cell.version;
        const now = runtime.now();
        const servable = stale !== undefined && isServable(stale, now);
        // A server error answering its own caller only (a response not to be stored), with no
        // stale value to serve instead: the others run their own loader, with no backoff.
        if (isPerCallerAnswer(error) && isLoaderFailure(error) && !servable) {
          ended = passed(version, undefined, policy);
          throw error instanceof HerdGuardError ? error : new LoaderFailedError(key, error);
        }
        // A client error (a 404, a 403) is the loader's answer, not an outage: the stale value must
        // not outlive it (no fail-safe, no backoff), so the key goes, with what was derived from
        // it. Other processes load for their own callers (their answer may differ).
        if (!isLoaderFailure(error)) {
          if (stale !== undefined) runtime.track(this.#onGone(key), 'delete', key);
          ended = passed(version, undefined, policy);
          throw error instanceof HerdGuardError ? error : new LoaderFailedError(key, error);
        }
        // On error: every caller of the cluster learns it at once (held in the lease's place for
        // the backoff, so the cluster makes one attempt per delay); serve stale (fail-safe) or
        // throw.
        // A takeover's failure is remembered as older than its fence: the holder it replaced may
        // still store its value under that fence, which this process then refreshes as any other.
        const failedAt = grant?.hedge !== undefined ? version - 1 : version;
        const { delayMs, failures } = this.#backoff.recordFailure(key, now, failedAt, {
          initialMs: policy.backoffInitialMs,
          maxMs: policy.backoffMaxMs,
          failuresBefore: grant?.failures ?? 0,
        });
        runtime.emit({ type: 'backoff', key, delayMs, failures });
        ended = {
          outcome: { kind: 'failed', fence: version, failures, failure: failureOf(error) },
          holdMs: servable ? Math.max(1, Math.min(delayMs, stale.hardExpireAt - now)) : delayMs,
          rememberMs: policy.backoffMaxMs,
        };
        if (servable) {
          runtime.emit({
            type: 'stale-on-error',
            key,
            reason: error instanceof LoaderTimeoutError ? 'loader-timeout' : 'loader-failed',
          });
          return { entry: stale, loaded: false };
        }
        throw error instanceof HerdGuardError ? error : new LoaderFailedError(key, error);
      }
      if (loaded === undefined) {
        // A value not to cache that cannot be shared answers nothing: this load is fenced.
        if (replaced === undefined) throw new LoadFencedError(key);
        return { entry: replaced, loaded: false };
      }
      // What the loader chose from its value: TTLs, tags, not to store it, or to keep the stale one.
      const { choice } = loaded;
      const chosen = choice.policy;
      // A value shared without its tag index would escape tag invalidation: write it once more,
      // else store the value stale. (One loaded neither under a lease nor beside a pass is never shared.)
      const lateTags =
        writer !== undefined && choice.cache ? this.#tagsToIndex(request, choice, indexed) : [];
      const unindexed = !(await this.#indexTags(key, lateTags, chosen));
      // An invalidation of a tag recorded only now did not find this key: if one came since the
      // load began, the value may predate it and is not stored.
      const missed =
        !unindexed && (await this.#invalidatedWhileLoading(key, lateTags, loadStartedAtMonotonic));
      const now = runtime.now();
      const version = writer?.fence ?? request.cell.version;
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
        const outcome = await this.#store(key, entry, writer);
        leaseSettled = outcome !== 'failed';
        stored = outcome === 'stored' && writer !== undefined;
        // Beside a pass, another load's value took its place first: nothing was fenced.
        if (outcome === 'fenced' && lease !== undefined)
          runtime.emit({ type: 'load-fenced', key, background: request.mode === 'background' });
      } else {
        // Not to be cached (hit-for-miss): the callers waiting elsewhere take this answer, and the
        // next reads load beside each other for a while instead of queueing for the lease.
        ended = passed(version, entry, chosen);
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
          ended === undefined
            ? runtime.store.releaseLease(lease)
            : runtime.store.endLease(lease, ended),
          'release-lease',
          key,
        );
      }
    }
  }

  /**
   * `stale` as the store holds it, read again (values are handed out by reference, and a caller may
   * have changed its copy); `stale` itself when the store holds another version now (then the load
   * is fenced) or cannot be asked.
   */
  async #asStored(key: string, stale: Entry): Promise<Entry> {
    const runtime = this.#runtime;
    const snapshot = await runtime.readAtStore(key);
    const entry = snapshot === undefined ? undefined : runtime.decoded(key, snapshot.entry);
    return entry !== undefined && entry.version === stale.version ? entry : stale;
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
   * Watches, while this process loads `key` under `lease`, for a value a later load stored: `found`
   * resolves with it, fresh and at a newer version than the lease's fence (the store's word for the
   * key, as a follower would read it), or with `undefined` once stopped. For a `hedge`, also (and at
   * once) the value of the holder it took over from, stored under its fence. Otherwise only once this
   * load has run long enough that a follower may deem it stuck ({@link MIN_STUCK_MS}, or
   * `waitTimeout` if shorter): a follower's takeover then answers this process's callers too,
   * whether or not this loader ever ends, while a load overtaken sooner (a `refresh()`) still
   * answers its own callers with its own value. Woken by the key's notifications; once the lease is
   * known lost, the store is also re-checked every {@link RECHECK_INTERVAL_MS} (notifications are
   * hints).
   */
  #replacementOf(
    key: string,
    lease: Lease,
    policy: ResolvedPolicy,
    hedge: string | undefined,
  ): { readonly found: Promise<Entry | LoadOutcome | undefined>; leaseLost(): void; stop(): void } {
    const runtime = this.#runtime;
    const watch = runtime.store.watchFill(key);
    const { fence } = lease;
    // A takeover takes the value of the holder it replaced at once: that holder stores it under the
    // takeover's fence, and it is as good (the first good result answers every waiter).
    const eligibleAt =
      performance.now() + (hedge === undefined ? Math.min(MIN_STUCK_MS, policy.waitTimeoutMs) : 0);
    const newest = hedge === undefined ? fence + 1 : fence;
    let lost = false;
    let stopped = false;
    const found = (async (): Promise<Entry | LoadOutcome | undefined> => {
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
        const entry = seen.version >= newest ? runtime.decoded(key, seen.entry) : undefined;
        if (entry !== undefined && entry.version >= newest && isFresh(entry, runtime.now()))
          return entry;
        // How the other load ended answers too: its value not to be cached; and for a takeover, the
        // failure of the holder it replaced (a holder's own callers keep waiting for their load,
        // whatever a takeover or a refresh() ended with: its value may still be stored).
        const { outcome } = seen;
        if (outcome !== undefined && outcome.fence >= newest) {
          if (outcome.kind === 'pass' ? outcome.entry !== undefined : hedge !== undefined)
            return outcome;
        }
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

  /**
   * What a fill makes of how the key's last load ended, held in its lease's place: a failure is its
   * answer (a stale value it accepts was looked for first); a pass gives a fill that `waited` for
   * that load its answer, and any other fill a load of its own, beside the other processes (the
   * lease is not taken). `undefined`: no outcome to act on.
   */
  #afterOutcome<T>(
    request: FillRequest<T>,
    outcome: LoadOutcome | undefined,
    waited: boolean,
  ): Promise<Fill> | undefined {
    if (outcome === undefined) return undefined;
    if (outcome.kind === 'failed')
      return Promise.reject(sharedFailure(request.key, outcome.failure));
    if (waited && outcome.entry !== undefined && outcome.fence >= request.cell.version)
      return Promise.resolve({ entry: outcome.entry, loaded: false });
    return this.#load(request, undefined, passLease(request.key, outcome.fence));
  }

  /** Nobody filled the key within `waitTimeout`: apply `onWaitTimeout`. */
  async #onWaitTimeout<T>(request: FillRequest<T>, waitedMs: number): Promise<Fill> {
    this.#runtime.emit({ type: 'wait-timeout', key: request.key, waitedMs });
    if (request.policy.onWaitTimeout === 'load') return this.#load(request, undefined);
    throw new UpstreamUnavailableError(request.key, waitedMs);
  }

  /**
   * One lease attempt; `refresh()` (and a follower whose wait timed out) takes over from a version.
   */
  async #tryLease<T>(
    request: FillRequest<T>,
    takeoverAfterWait: number | undefined,
  ): Promise<LeaseTry> {
    const { key, policy, cell } = request;
    const forced = request.mode === 'forced';
    const takeoverFrom = forced ? request.fromVersion : takeoverAfterWait;
    try {
      const runtime = this.#runtime;
      const attempt = await runtime.store.acquireLease(key, policy.leaseTtlMs, {
        takeoverFrom,
        takeover: forced ? 'forced' : 'stuck',
      });
      const { lease, current, outcome } = attempt;
      // The flight now reflects at least this version: callers that saw it may join.
      cell.learn(current.version);
      if (attempt.repaired === true) runtime.emit({ type: 'corrupt-entry', key });
      if (lease !== undefined && takeoverAfterWait !== undefined && !forced)
        runtime.emit({ type: 'lease-takeover', key });
      const entry = runtime.decoded(key, current.entry);
      if (lease === undefined)
        return { kind: 'contended', current: entry, version: current.version, outcome };
      const failures = outcome?.kind === 'failed' ? outcome.failures : 0;
      return { kind: 'owner', lease, current: entry, failures };
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

/** A pass (hit-for-miss) left by a load at `fence`, with the answer its waiters take. */
function passed(fence: number, entry: Entry | undefined, policy: ResolvedPolicy): LeaseEnd {
  return {
    outcome: { kind: 'pass', fence, entry },
    holdMs: Math.max(1, Math.min(policy.softMs, PASS_MAX_MS)),
    rememberMs: 0,
  };
}

/** A loader's failure as the other processes read it back. */
function failureOf(error: unknown): SharedFailure {
  const message = (error instanceof Error ? error.message : String(error)).slice(
    0,
    SHARED_MESSAGE_MAX,
  );
  const name = error instanceof Error ? error.name : 'Error';
  if (error instanceof LoaderTimeoutError) return { name, message, timeoutMs: error.timeoutMs };
  return { name, message };
}

/** The error a caller gets for a failure another process's load of `key` shared. */
function sharedFailure(key: string, failure: SharedFailure): HerdGuardError {
  if (failure.timeoutMs !== undefined) return new LoaderTimeoutError(key, failure.timeoutMs);
  const cause = new Error(failure.message);
  cause.name = failure.name;
  return new LoaderFailedError(key, cause);
}
