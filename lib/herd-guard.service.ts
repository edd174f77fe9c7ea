import { Inject, Injectable, Optional } from '@nestjs/common';
import { Observable, isObservable } from 'rxjs';
import {
  type ClearMode,
  HerdEngine,
  type LoadContext,
  type Loader,
  type ReadOptions,
  type ReadResult,
} from './core/herd-engine.js';
import type { HerdEventListener } from './core/events.js';
import type { StatsSnapshot } from './core/stats.js';
import { ConfigurationError } from './errors/configuration.error.js';
import {
  HERD_GUARD_CREDENTIAL_HEADERS,
  HERD_GUARD_ENGINE,
  HERD_GUARD_HOT_KEYS,
} from './herd-guard.constants.js';
import type { HotKeyTracker, HotKeysSnapshot } from './metrics/hot-key-tracker.js';
import type { HerdLoader } from './interfaces/herd-loader.interface.js';
import type { WarmEntry, WarmOptions, WarmReport } from './interfaces/warm.interface.js';
import type { StoreHealth } from './core/herd-store.interface.js';

/** Options of the writes that store a value: its policy and tags. */
export type WriteOptions = Pick<ReadOptions, 'policy' | 'tags'>;

/** Counters, store health and the hottest keys of one cache (keys stay out of metric labels). */
export interface HerdGuardMetricsSnapshot extends StatsSnapshot {
  readonly store: StoreHealth & { readonly name: string };
  /** Top keys by reads and by loads; empty when the module runs with `hotKeys: 0`. */
  readonly hotKeys: HotKeysSnapshot;
}

/**
 * The cache of one `HerdGuardModule`: one engine per module instance, so two applications in one
 * process never share entries. Every read is coalesced (one loader run per key at a time, and one
 * per cluster with the Redis store), serves stale values while one refresh runs in the background,
 * and takes the module's default policy, overridden field by field by `options.policy`.
 */
@Injectable()
export class HerdGuardService {
  /**
   * `credentialHeaders`: the module option, lower case (`HerdGuardInterceptor` treats requests with
   * one as private on the routes of this cache).
   */
  constructor(
    @Inject(HERD_GUARD_ENGINE) readonly engine: HerdEngine,
    @Optional() @Inject(HERD_GUARD_HOT_KEYS) private readonly hotKeys?: HotKeyTracker,
    @Optional()
    @Inject(HERD_GUARD_CREDENTIAL_HEADERS)
    readonly credentialHeaders: readonly string[] = [],
  ) {}

  /**
   * The value of `key`, loaded with `loader` at most once across all concurrent callers. A store
   * that fails is reported (events, metrics) and read as empty, never thrown.
   *
   * @throws {InvalidKeyError} `key` is not a non-empty string of well-formed Unicode.
   * @throws {ClosedError} The module has shut down.
   * @throws {ConfigurationError} `loader` is not a function, an option is invalid (policy, tags,
   *   timeout), or loaders read each other's keys in a cycle.
   * @throws {LoaderFailedError} The loader failed (its error is the `cause`) and no stale value is
   *   served instead. A herd-guard error the loader throws is passed on as it is.
   * @throws {LoaderTimeoutError} The loader ran past `loaderHardTimeout`, with no stale value to
   * serve.
   * @throws {UpstreamUnavailableError} Another process held the key's lease past `waitTimeout`
   *   (`onWaitTimeout: 'error'`), with no stale value to serve.
   * @throws {WaitTimeoutError} `options.timeout` passed before a value arrived.
   * @throws {WaitAbortedError} `options.signal` fired before a value arrived.
   * @throws {SerializationError} The loaded value cannot be stored with the key's serializer.
   */
  getOrLoad<T>(key: string, loader: HerdLoader<T>, options?: ReadOptions): Promise<T> {
    return this.engine.getOrLoad(key, toEngineLoader(loader), options);
  }

  /**
   * Like {@link getOrLoad}, with how the read was answered (`fresh`, `stale`, `miss`) and the
   * entry's timing.
   *
   * @throws {InvalidKeyError} `key` is not a non-empty string of well-formed Unicode.
   * @throws {ClosedError} The module has shut down.
   * @throws {ConfigurationError} `loader` is not a function, an option is invalid (policy, tags,
   *   timeout), or loaders read each other's keys in a cycle.
   * @throws {LoaderFailedError} The loader failed (its error is the `cause`) and no stale value is
   *   served instead. A herd-guard error the loader throws is passed on as it is.
   * @throws {LoaderTimeoutError} The loader ran past `loaderHardTimeout`, with no stale value to
   * serve.
   * @throws {UpstreamUnavailableError} Another process held the key's lease past `waitTimeout`
   *   (`onWaitTimeout: 'error'`), with no stale value to serve.
   * @throws {WaitTimeoutError} `options.timeout` passed before a value arrived.
   * @throws {WaitAbortedError} `options.signal` fired before a value arrived.
   * @throws {SerializationError} The loaded value cannot be stored with the key's serializer.
   */
  read<T>(key: string, loader: HerdLoader<T>, options?: ReadOptions): Promise<ReadResult<T>> {
    return this.engine.read(key, toEngineLoader(loader), options);
  }

  /**
   * {@link getOrLoad} as a cold Observable (each subscription reads). A fresh value or a load emits
   * once and completes. A stale value is emitted at once; when the background refresh lands with a
   * newer value, that value is emitted too; then it completes (after the stale value alone if the
   * refresh failed or was not needed). It errors with what {@link read} rejects with.
   */
  getOrLoad$<T>(key: string, loader: HerdLoader<T>, options?: ReadOptions): Observable<T> {
    return new Observable<T>((subscriber) => {
      this.read(key, loader, options).then(
        (result) => {
          if (subscriber.closed) return;
          subscriber.next(result.value);
          if (result.path !== 'stale' || result.revalidated === undefined) {
            subscriber.complete();
            return;
          }
          void result.revalidated.then((fresh) => {
            if (subscriber.closed) return;
            if (fresh !== undefined) subscriber.next(fresh.value);
            subscriber.complete();
          });
        },
        (error: unknown) => subscriber.error(error),
      );
    });
  }

  /**
   * The servable value of `key` without loading, or `undefined` when absent or past hard expiry
   * (or when the store fails: that is reported, not thrown).
   *
   * @throws {InvalidKeyError} `key` is not a non-empty string of well-formed Unicode.
   * @throws {ClosedError} The module has shut down.
   */
  peek<T>(key: string): Promise<ReadResult<T> | undefined> {
    return this.engine.peek<T>(key);
  }

  /**
   * Stores `value` as the key's current value (write-through after an update): it wins over every
   * earlier write and every load already running, and values derived from the key go stale.
   * `null`/`undefined` store "not found".
   *
   * @throws {InvalidKeyError} `key` is not a non-empty string of well-formed Unicode.
   * @throws {ClosedError} The module has shut down.
   * @throws {ConfigurationError} The policy or a tag is invalid.
   * @throws {SerializationError} `value` cannot be stored with the key's serializer.
   * @throws {StoreError} The store failed the write (or the invalidation of values derived from the
   * key).
   */
  set<T>(key: string, value: T, options?: WriteOptions): Promise<void> {
    return this.engine.set(key, value, options);
  }

  /**
   * Marks `key` stale: the next read gets the old value at once and one background refresh runs
   * (no herd, unlike {@link delete}). Loads of the key already running (on any pod) are fenced, and
   * values derived from the key (a route over a `@Cached` method) go stale too. Resolves whether
   * the
   * key held a value; either way, nothing loaded before the call is served as fresh after it.
   *
   * @throws {InvalidKeyError} `key` is not a non-empty string of well-formed Unicode.
   * @throws {ClosedError} The module has shut down.
   * @throws {StoreError} The store failed the invalidation (of the key or of a value derived from
   * it).
   */
  expire(key: string): Promise<boolean> {
    return this.engine.expire(key);
  }

  /**
   * Removes `key`: the next read waits for a (coalesced) load. Prefer {@link expire} for hot keys.
   *
   * @throws {InvalidKeyError} `key` is not a non-empty string of well-formed Unicode.
   * @throws {ClosedError} The module has shut down.
   * @throws {StoreError} The store failed the deletion (of the key or of a value derived from it).
   */
  delete(key: string): Promise<void> {
    return this.engine.delete(key);
  }

  /**
   * Invalidates every key of this cache (its namespace) in one step, without listing them:
   * `'expire'` (default) marks them stale (each is served stale to every read until its one refresh
   * lands, and still as a fail-safe), `'delete'` removes them (the next read of each waits for a load). Loads
   * running on any pod are fenced; nothing loaded before the call is served as fresh after it.
   *
   * @throws {ConfigurationError} `mode` is neither `'expire'` nor `'delete'`, or the store cannot
   * clear.
   * @throws {ClosedError} The module has shut down.
   * @throws {StoreError} The store failed the clear.
   */
  clear(mode?: ClearMode): Promise<void> {
    return this.engine.clear(mode);
  }

  /**
   * Marks every key stored with `tag` stale, so each refreshes once on its next read. Returns how
   * many.
   *
   * @throws {ConfigurationError} `tag` is not a non-empty string of well-formed Unicode.
   * @throws {StoreError} The store failed to list or invalidate the keys.
   */
  expireTag(tag: string): Promise<number> {
    return this.engine.expireTag(tag);
  }

  /**
   * Deletes every key stored with `tag`. Returns how many keys carried the tag.
   *
   * @throws {ConfigurationError} `tag` is not a non-empty string of well-formed Unicode.
   * @throws {StoreError} The store failed to list or delete the keys.
   */
  deleteTag(tag: string): Promise<number> {
    return this.engine.deleteTag(tag);
  }

  /**
   * Loads `key` now, even if a fresh value is cached (prefetch ahead of expiry), still coalesced
   * and leased. Rejects when the load fails and nothing servable is cached.
   *
   * @throws {InvalidKeyError} `key` is not a non-empty string of well-formed Unicode.
   * @throws {ClosedError} The module has shut down.
   * @throws {ConfigurationError} `loader` is not a function, or the policy or a tag is invalid.
   * @throws {LoaderFailedError} The loader failed (its error is the `cause`). A herd-guard error
   * the
   *   loader throws is passed on as it is.
   * @throws {LoaderTimeoutError} The loader ran past `loaderHardTimeout`.
   * @throws {UpstreamUnavailableError} Another process held the key's lease past `waitTimeout`
   *   (`onWaitTimeout: 'error'`).
   * @throws {SerializationError} The loaded value cannot be stored with the key's serializer.
   */
  refresh<T>(key: string, loader: HerdLoader<T>, options?: WriteOptions): Promise<ReadResult<T>> {
    return this.engine.refresh(key, toEngineLoader(loader), options);
  }

  /**
   * Loads many keys ahead of traffic, `concurrency` at a time (default 4), with {@link refresh}.
   * A key that fails is reported in `failed` (with the error {@link refresh} would reject with) and
   * does not stop the others.
   *
   * @throws {ConfigurationError} `concurrency` is not a positive integer.
   */
  async warm(entries: Iterable<WarmEntry>, options: WarmOptions = {}): Promise<WarmReport> {
    const concurrency = options.concurrency ?? 4;
    if (!Number.isInteger(concurrency) || concurrency < 1) {
      throw new ConfigurationError(
        'concurrency',
        `expected a positive integer, received ${String(concurrency)}`,
      );
    }
    const pending = entries[Symbol.iterator]();
    const failed: Array<{ key: string; error: unknown }> = [];
    let warmed = 0;
    // Workers share one iterator: each takes the next entry when its previous load ends.
    const worker = async (): Promise<void> => {
      for (let next = pending.next(); next.done !== true; next = pending.next()) {
        const { key, loader, policy, tags } = next.value;
        try {
          await this.engine.warm(key, toEngineLoader(loader), { policy, tags });
          warmed += 1;
        } catch (error) {
          failed.push({ key, error });
        }
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
    return { warmed, failed };
  }

  /**
   * The context of the load running in this async context, or `undefined` outside one: a `@Cached`
   * method, a route handler, or code they call, chooses through it how the value being loaded is
   * cached (`setPolicy`, `doNotCache`, `unchanged`) and reads the stale value being refreshed.
   * The innermost load of this cache counts (another cache's loads have their own).
   */
  currentLoad<T = unknown>(): LoadContext<T> | undefined {
    return this.engine.currentLoad<T>();
  }

  /** Counters since start: reads by path, loads, coalesced callers, leases, waits, errors. */
  stats(): StatsSnapshot {
    return this.engine.stats();
  }

  /** {@link stats} with the store's health and the `top` hottest keys (by reads and by loads). */
  metrics(top = 10): HerdGuardMetricsSnapshot {
    return {
      ...this.engine.stats(),
      store: { name: this.engine.store.name, ...this.engine.store.health() },
      hotKeys: this.hotKeys?.snapshot(top) ?? { requested: [], refreshed: [] },
    };
  }

  /** The store's health (`up`, `degraded`, `down`), for a health endpoint. */
  health(): StoreHealth {
    return this.engine.store.health();
  }

  /**
   * Subscribes to engine events (metrics, logs). Returns the unsubscribe function. With `reads:
   * false` the listener is not given `read` events, and hits stay free of them.
   */
  onEvent(listener: HerdEventListener, options?: { readonly reads?: boolean }): () => void {
    return this.engine.onEvent(listener, options);
  }
}

/** Adapts a loader that may return an Observable to the engine's promise-based loader. */
function toEngineLoader<T>(loader: HerdLoader<T>): Loader<T> {
  // Not a function: let the engine report it with its usual error.
  if (typeof loader !== 'function') return loader as unknown as Loader<T>;
  return (context: LoadContext<T>) => {
    const output = loader(context);
    return isObservable(output) ? lastValue(output, context.signal) : output;
  };
}

/**
 * The last value of `source` (`undefined` if it completes empty); unsubscribes when `signal` fires.
 */
function lastValue<T>(source: Observable<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let last: T | undefined;
    const stop = (): void => subscription.unsubscribe();
    const subscription = source.subscribe({
      next: (value) => {
        last = value;
      },
      error: (error: unknown) => {
        signal.removeEventListener('abort', stop);
        reject(error);
      },
      complete: () => {
        signal.removeEventListener('abort', stop);
        resolve(last as T);
      },
    });
    if (!subscription.closed) signal.addEventListener('abort', stop, { once: true });
  });
}
