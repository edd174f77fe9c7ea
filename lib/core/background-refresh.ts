import type { EngineRuntime } from './engine-runtime.js';
import type { Entry } from './entry.js';
import { type FillProtocol, isNewer } from './fill-protocol.js';
import type { Loader } from './loader.js';
import type { ResolvedPolicy } from './policy.js';
import { type ReadResult, toResult } from './read-result.js';

const NO_REVALIDATION: Promise<undefined> = Promise.resolve(undefined);

interface Revalidation {
  readonly version: number;
  readonly promise: Promise<ReadResult<unknown> | undefined>;
}

/**
 * Background refresh of stale keys: at most one per key in this process (one per cluster with the
 * lease), none while the key backs off after a failure, and never joined by a caller that saw a
 * newer version of the key than the refresh started from.
 */
export class BackgroundRefresh {
  /** The outcome of the refresh in flight per key, shared by its stale callers; removed when it settles. */
  readonly #revalidations = new Map<string, Revalidation>();

  constructor(
    private readonly runtime: EngineRuntime,
    private readonly fills: FillProtocol,
  ) {}

  /** Starts one refresh of `key` (seen stale at `version`), unless one runs already or it is backing off. */
  start<T>(
    key: string,
    loader: Loader<T>,
    policy: ResolvedPolicy,
    stale: Entry<T>,
    version: number,
    tags: readonly string[] | undefined,
  ): void {
    if (this.#skip(key, version)) return;
    this.#run(key, loader, policy, stale, version, tags).catch(ignore);
  }

  /**
   * {@link start} for callers that want to know how it ends: one promise per refresh, shared by
   * every stale caller of the key, settling with the new result or `undefined`. Never rejects.
   */
  revalidation<T>(
    key: string,
    loader: Loader<T>,
    policy: ResolvedPolicy,
    stale: Entry<T>,
    version: number,
    tags: readonly string[] | undefined,
  ): Promise<ReadResult<T> | undefined> {
    const pending = this.#revalidations.get(key);
    if (pending !== undefined && pending.version >= version) {
      return pending.promise as Promise<ReadResult<T> | undefined>;
    }
    if (this.runtime.backoff.isBackingOff(key, this.runtime.now(), version)) return NO_REVALIDATION;
    const promise = this.#run(key, loader, policy, stale, version, tags).then(
      (fill) => (fill.loaded || isNewer(fill.entry, stale) ? toResult(fill.entry as Entry<T>, 'miss') : undefined),
      () => undefined,
    );
    const revalidation: Revalidation = { version, promise };
    this.#revalidations.set(key, revalidation);
    void promise.then(() => {
      if (this.#revalidations.get(key) === revalidation) this.#revalidations.delete(key);
    });
    return promise;
  }

  /** A refresh that sees `version` runs already, or the key is backing off. */
  #skip(key: string, version: number): boolean {
    return (
      this.runtime.flights.joinable(key, version) || this.runtime.backoff.isBackingOff(key, this.runtime.now(), version)
    );
  }

  #run<T>(
    key: string,
    loader: Loader<T>,
    policy: ResolvedPolicy,
    stale: Entry<T>,
    version: number,
    tags: readonly string[] | undefined,
  ) {
    // The flight is registered now (later stale callers skip it); its work starts after the callers
    // already answered in this turn have their stale value, so a refresh never delays a stale hit.
    const { runtime } = this;
    return runtime.flights.run(key, version, (cell) => {
      runtime.refreshesStarting += 1;
      return nextTurn().then(() => {
        runtime.refreshesStarting -= 1;
        return this.fills.run({ key, loader, policy, stale, tags, mode: 'background', fromVersion: version, cell });
      });
    });
  }
}

function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

function ignore(): void {
  // A background refresh reports its outcome through events; nobody awaits it.
}
