import { ClosedError } from '../errors/closed.error.js';
import { InvalidKeyError } from '../errors/invalid-key.error.js';
import { isValidKey } from '../keys/valid-key.js';
import type { Entry } from './entry.js';
import type { HerdEvent, HerdEventListener, ReadCounter, ReadEvent } from './events.js';
import {
  CORRUPT_ENTRY,
  type HerdStore,
  type StoreRead,
  type StoreSnapshot,
} from './herd-store.interface.js';
import { KeyFlights } from './key-flights.js';
import { LoadScopes } from './load-scope.js';
import type { LoadTracer } from './load-tracer.js';
import { EngineStats } from './stats.js';

/** A read of a store that could not answer: nothing known, and a version every flight may serve. */
export const UNREACHABLE: StoreSnapshot = Object.freeze({ entry: undefined, version: 0 });

/**
 * What the parts of one engine share: the store and the clocks, the flights and loader scopes
 * that the read path and the fill protocol both use, the events and counters, and whether the
 * engine is closed. State one part changes lives in that part.
 */
export class EngineRuntime {
  readonly flights = new KeyFlights();
  readonly scopes = new LoadScopes();
  readonly stats = new EngineStats();
  readonly #listeners: HerdEventListener[] = [];
  /** The listeners that also want `read` events; see `subscribe`. */
  readonly #readListeners: HerdEventListener[] = [];
  /**
   * The listeners of `read` events, read-only: the hot path builds a `read` event (and reads the
   * clock for its duration) only when there is one.
   */
  readonly readListeners: readonly HerdEventListener[] = this.#readListeners;
  /** Counters of reads per key (hot keys), told once per answer; see `countReads`. */
  readonly #readCounters: ReadCounter[] = [];
  /**
   * Store writes started without awaiting them (lease release/hold); `settled()` waits for them.
   */
  readonly #pendingOps = new Set<Promise<unknown>>();
  #closed = false;
  /** Follows loads and waits for tracing; written by the engine's `trace()` only. */
  tracer: LoadTracer | undefined = undefined;
  /** Store errors already reported (a shared read's error reaches every caller that joined it). */
  readonly #reported = new WeakSet<object>();

  constructor(
    readonly store: HerdStore,
    /** Epoch ms, for TTLs only (never for ordering). */
    readonly now: () => number,
    readonly random: () => number,
  ) {}

  get closed(): boolean {
    return this.#closed;
  }

  /** Refuses new work from now on. Called by the engine's `close()` only. */
  close(): void {
    this.#closed = true;
  }

  /**
   * Adds an event listener (given `read` events too unless `reads` is false); returns the function
   * that removes it.
   */
  subscribe(listener: HerdEventListener, reads = true): () => void {
    const removeAll = addTo(this.#listeners, listener);
    const removeRead = reads ? addTo(this.#readListeners, listener) : undefined;
    return () => {
      removeAll();
      removeRead?.();
    };
  }

  /** Tells `counter` the key of every read answered from now on; returns the function that stops. */
  countReads(counter: ReadCounter): () => void {
    return addTo(this.#readCounters, counter);
  }

  /** A read of `key` answered `callers` callers: the read counters count it in place. */
  countAnswer(key: string, callers: number): void {
    const counters = this.#readCounters;
    for (let i = 0; i < counters.length; i += 1) counters[i]!.add(key, callers);
  }

  /** Reports a read to the listeners of `read` events, once per caller it answered. */
  emitRead(event: ReadEvent, callers: number): void {
    for (const listener of this.#readListeners) {
      for (let i = 0; i < callers; i += 1) {
        try {
          listener(event);
        } catch {
          // A listener's failure must not break the read path.
        }
      }
    }
  }

  /** Reads the store; a failing store is reported and read as nothing (the caller then loads). */
  storeGet(key: string): StoreSnapshot | Promise<StoreSnapshot> {
    try {
      const found = this.store.get(key);
      return found instanceof Promise
        ? found.catch((error: unknown) => this.storeReadFailed(key, error))
        : found;
    } catch (error) {
      return this.storeReadFailed(key, error);
    }
  }

  /**
   * Reads the store itself, never a copy it keeps (see `HerdStore.getAtStore`): what a loader reads
   * of other keys. `undefined` when the store could not answer (reported).
   */
  async readAtStore(key: string): Promise<StoreSnapshot | undefined> {
    const { store } = this;
    try {
      return await (store.getAtStore === undefined ? store.get(key) : store.getAtStore(key));
    } catch (error) {
      this.storeReadFailed(key, error);
      return undefined;
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

  /** Runs a store operation nobody awaits; reports its failure and lets `settled()` wait for it. */
  track(operation: Promise<unknown>, name: string, key: string): void {
    const tracked = operation.then(
      () => undefined,
      (error: unknown) => this.emit({ type: 'store-error', operation: name, key, error }),
    );
    this.#pendingOps.add(tracked);
    void tracked.then(() => this.#pendingOps.delete(tracked));
  }

  /** Store operations started by `track` and not yet acknowledged. */
  pendingStoreOps(): number {
    return this.#pendingOps.size;
  }

  /** Resolves once the store operations tracked so far have ended. */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.#pendingOps]);
  }

  emit(event: HerdEvent): void {
    this.stats.count(event);
    for (const listener of this.#listeners) {
      try {
        listener(event);
      } catch {
        // A listener's failure must not break the read path.
      }
    }
  }

  assertOpen(key: unknown): asserts key is string {
    if (!isValidKey(key)) throw new InvalidKeyError(key);
    if (this.#closed) throw new ClosedError(key);
  }
}

/** Adds `item` to `list`; returns the function that removes it (once). */
function addTo<T>(list: T[], item: T): () => void {
  list.push(item);
  return () => {
    const index = list.indexOf(item);
    if (index >= 0) list.splice(index, 1);
  };
}
