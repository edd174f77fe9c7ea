import type { EngineRuntime } from './engine-runtime.js';
import { type Entry, isNewer } from './entry.js';
import type { Fill } from './fill.js';
import type { FillProtocol } from './fill-protocol.js';
import type { Loader } from './loader.js';
import type { ResolvedPolicy } from './policy.js';
import { type ReadResult, toResult } from './read-result.js';

const NO_REVALIDATION: Promise<undefined> = Promise.resolve(undefined);

/** What a refresh loads and how: the read that found the key stale passes itself. */
export interface RefreshRequest<T> {
  readonly key: string;
  readonly loader: Loader<T>;
  readonly policy: ResolvedPolicy;
  readonly tags: readonly string[] | undefined;
}

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
  readonly #runtime: EngineRuntime;
  readonly #fills: FillProtocol;
  /**
   * The outcome of the refresh in flight per key, shared by its stale callers; removed when it
   * settles.
   */
  readonly #revalidations = new Map<string, Revalidation>();
  /** Refreshes registered whose fill starts on the next turn: in flight, though not yet fills. */
  #starting = 0;

  constructor(runtime: EngineRuntime, fills: FillProtocol) {
    this.#runtime = runtime;
    this.#fills = fills;
  }

  /**
   * Starts one refresh of the key (seen at `version`, holding `stale`), unless one runs or it backs
   * off.
   */
  start<T>(request: RefreshRequest<T>, stale: Entry<T>, version: number): void {
    if (this.#skip(request.key, version)) return;
    this.#run(request, stale, version).catch(ignore);
  }

  /**
   * {@link start} for callers that want to know how it ends: one promise per refresh, shared by
   * every stale caller of the key, settling with the new result or `undefined`. Never rejects.
   */
  revalidation<T>(
    request: RefreshRequest<T>,
    stale: Entry<T>,
    version: number,
  ): Promise<ReadResult<T> | undefined> {
    const { key } = request;
    const pending = this.#revalidations.get(key);
    if (pending !== undefined && pending.version >= version) {
      return pending.promise as Promise<ReadResult<T> | undefined>;
    }
    if (this.#fills.backingOff(key, version)) return NO_REVALIDATION;
    const promise = this.#run(request, stale, version).then(
      (fill) =>
        fill.loaded || isNewer(fill.entry, stale)
          ? toResult(fill.entry as Entry<T>, 'miss')
          : undefined,
      () => undefined,
    );
    const revalidation: Revalidation = { version, promise };
    this.#revalidations.set(key, revalidation);
    void promise.then(() => {
      if (this.#revalidations.get(key) === revalidation) this.#revalidations.delete(key);
    });
    return promise;
  }

  /** Refreshes registered whose fill has not started yet (they count as in flight). */
  starting(): number {
    return this.#starting;
  }

  /** A refresh that sees `version` runs already, or the key is backing off. */
  #skip(key: string, version: number): boolean {
    return this.#runtime.flights.joinable(key, version) || this.#fills.backingOff(key, version);
  }

  #run<T>(request: RefreshRequest<T>, stale: Entry<T>, version: number): Promise<Fill> {
    const { key, loader, policy, tags } = request;
    // The flight is registered now (later stale callers skip it); its work starts after the callers
    // already answered in this turn have their stale value, so a refresh never delays a stale hit.
    return this.#runtime.flights.run(key, version, (cell) => {
      this.#starting += 1;
      return nextTurn().then(() => {
        this.#starting -= 1;
        return this.#fills.run({
          key,
          loader,
          policy,
          stale,
          tags,
          mode: 'background',
          fromVersion: version,
          cell,
        });
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
