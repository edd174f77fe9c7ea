import { AsyncLocalStorage } from 'node:async_hooks';
import { type Entry, isFresh } from './entry.js';

/**
 * What a running loader has read from the same cache: a value derived from other keys is never
 * fresher than they are. Its soft and hard expiry are bounded by theirs, and it is stored already
 * stale when it read a stale input or one that could not be tracked. Written by the engine's reads
 * made inside the loader, read once when its value is stored.
 */
export class LoadScope {
  /** Earliest soft expiry among the inputs (the read time for an input that was stale). */
  softBoundMs = Number.POSITIVE_INFINITY;
  /** Earliest hard expiry among the inputs. */
  hardBoundMs = Number.POSITIVE_INFINITY;
  /** An input's link could not be recorded, so its invalidation would not reach this value. */
  untracked = false;
  /** Set when the loader has returned: later reads are not its inputs. */
  closed = false;

  constructor(
    /** The key being loaded. */
    readonly key: string,
    /** The load this one runs inside (an input loaded for a derived value), for cycle detection. */
    readonly parent: LoadScope | undefined,
    /** Until when the store keeps this key in its inputs' dependents (epoch ms). */
    readonly linkUntilMs: number,
  ) {}

  /** Records one input as read at `now`. */
  record(entry: Entry, now: number): void {
    this.hardBoundMs = Math.min(this.hardBoundMs, entry.hardExpireAt);
    this.softBoundMs = Math.min(this.softBoundMs, isFresh(entry, now) ? entry.softExpireAt : now);
  }

  /** True when `key` is this load's key or one it runs inside (reading it would wait for itself). */
  includes(key: string): boolean {
    return this.key === key || (this.parent?.includes(key) ?? false);
  }
}

/** The scope of the loader running in the current async context, for one engine. */
export class LoadScopes {
  readonly #storage = new AsyncLocalStorage<LoadScope>();

  /** The open scope of the loader this code runs inside, if any. */
  current(): LoadScope | undefined {
    const scope = this.#storage.getStore();
    return scope === undefined || scope.closed ? undefined : scope;
  }

  run<T>(scope: LoadScope, fn: () => T): T {
    return this.#storage.run(scope, fn);
  }
}
