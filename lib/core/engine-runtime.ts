import { ClosedError } from '../errors/closed.error.js';
import { InvalidKeyError } from '../errors/invalid-key.error.js';
import { isValidKey } from '../keys/valid-key.js';
import {
  CORRUPT_ENTRY,
  type FillWatch,
  type HerdStore,
  type StoreRead,
  type StoreSnapshot,
} from './herd-store.interface.js';
import { Backoff } from './backoff.js';
import type { Entry } from './entry.js';
import type { HerdEvent, HerdEventListener } from './events.js';
import { KeyFlights } from './key-flights.js';
import { LoadScopes } from './load-scope.js';
import { EngineStats } from './stats.js';

/** A read of a store that could not answer: nothing known, and a version every flight may serve. */
const UNREACHABLE: StoreSnapshot = Object.freeze({ entry: undefined, version: 0 });

/**
 * What the parts of one engine share: the store, the clocks, the flights in progress, the event
 * listeners, and the work `close()` must stop or wait for. One per engine; the read path, the fill
 * protocol, background refresh and invalidation each hold it.
 */
export class EngineRuntime {
  readonly flights = new KeyFlights();
  readonly scopes = new LoadScopes();
  readonly stats = new EngineStats();
  readonly backoff: Backoff;
  readonly listeners: HerdEventListener[] = [];
  /** Store writes started without awaiting them (lease release/hold); `close()` waits for them. */
  readonly pendingOps = new Set<Promise<unknown>>();
  /** Fill watches of followers; `close()` ends their waits. Added and removed by the fill protocol only. */
  readonly watches = new Set<FillWatch>();
  /** Background refreshes registered whose fill starts on the next turn. Counted by background refresh only. */
  refreshesStarting = 0;
  /** Fills running, superseded ones included; `close()` waits for them. Added and removed by the fill protocol only. */
  readonly fills = new Set<Promise<unknown>>();
  /** One per running loader; `close()` aborts them. Added and removed by the fill protocol only. */
  readonly loaders = new Map<AbortController, string>();
  /** Set once by `close()`. */
  closed = false;
  /** Store errors already reported (a shared read's error reaches every caller that joined it). */
  readonly #reported = new WeakSet<object>();

  constructor(
    readonly store: HerdStore,
    /** Epoch ms, for TTLs only (never for ordering). */
    readonly now: () => number,
    readonly random: () => number,
  ) {
    this.backoff = new Backoff(random);
  }

  /** Reads the store; a failing store is reported and read as nothing (the caller then loads). */
  storeGet(key: string): StoreSnapshot | Promise<StoreSnapshot> {
    try {
      const found = this.store.get(key);
      return found instanceof Promise ? found.catch((error: unknown) => this.storeReadFailed(key, error)) : found;
    } catch (error) {
      return this.storeReadFailed(key, error);
    }
  }

  storeReadFailed(key: string, error: unknown): StoreSnapshot {
    // A read shared by many callers fails once for all of them: count the failed command once.
    if (typeof error !== 'object' || error === null || !this.#reported.has(error)) {
      if (typeof error === 'object' && error !== null) this.#reported.add(error);
      this.emit({ type: 'store-error', operation: 'get', key, error });
    }
    return UNREACHABLE;
  }

  /** The entry of a read, with a corrupt one reported and read as absent. */
  decoded(key: string, found: StoreRead): Entry | undefined {
    if (found !== CORRUPT_ENTRY) return found;
    this.emit({ type: 'corrupt-entry', key });
    return undefined;
  }

  /** Runs a store operation nobody awaits; reports its failure and lets `close()` wait for it. */
  track(operation: Promise<unknown>, name: string, key: string): void {
    const tracked = operation.then(
      () => undefined,
      (error: unknown) => this.emit({ type: 'store-error', operation: name, key, error }),
    );
    this.pendingOps.add(tracked);
    void tracked.then(() => this.pendingOps.delete(tracked));
  }

  emit(event: HerdEvent): void {
    this.stats.count(event);
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch {
        // A listener's failure must not break the read path.
      }
    }
  }

  assertOpen(key: unknown): asserts key is string {
    if (!isValidKey(key)) throw new InvalidKeyError(key);
    if (this.closed) throw new ClosedError(key);
  }
}
