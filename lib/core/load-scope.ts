import { AsyncLocalStorage } from 'node:async_hooks';
import { type Entry, type InputBounds, isFresh } from './entry.js';
import type { LoadContext } from './loader.js';

/**
 * What a running loader has read from the same cache: a value derived from other keys is never
 * fresher than they are. Its soft and hard expiry are bounded by theirs, and it is stored already
 * stale when it read a stale input or one that could not be tracked. Written by the engine's reads
 * made inside the loader, read once when its value is stored.
 */
export class LoadScope implements InputBounds {
  /** Earliest soft expiry among the inputs (the read time for an input that was stale). */
  softBoundMs = Number.POSITIVE_INFINITY;
  /** Earliest hard expiry among the inputs. */
  hardBoundMs = Number.POSITIVE_INFINITY;
  /** An input's link could not be recorded, so its invalidation would not reach this value. */
  untracked = false;
  /** Set when the loader has returned: later reads are not its inputs. */
  closed = false;
  /**
   * Inputs this loader is reading right now (written by the engine's input reads), for cycle
   * detection.
   */
  readonly waitingOn = new Set<string>();

  constructor(
    /** The key being loaded. */
    readonly key: string,
    /** The load this one runs inside (an input loaded for a derived value), for cycle detection. */
    readonly parent: LoadScope | undefined,
    /** How long the store keeps this key among its inputs' dependents. */
    readonly linkTtlMs: number,
    /** The context the loader was given, for code it calls (`currentLoad()`). */
    readonly context?: LoadContext<unknown>,
  ) {}

  /**
   * The bounds of a value that lives `lifetimeMs` from `loadStartedAt`: those of its inputs, and,
   * when its loader chose to outlive the links recorded to its inputs, no later than they expire
   * (an input invalidated after that would no longer reach it).
   */
  boundsFor(lifetimeMs: number, loadStartedAt: number): InputBounds {
    if (lifetimeMs <= this.linkTtlMs || this.hardBoundMs === Number.POSITIVE_INFINITY) return this;
    return {
      softBoundMs: this.softBoundMs,
      hardBoundMs: Math.min(this.hardBoundMs, loadStartedAt + this.linkTtlMs),
      untracked: this.untracked,
    };
  }

  /** Records one input as read at `now`. */
  record(entry: Entry, now: number): void {
    this.hardBoundMs = Math.min(this.hardBoundMs, entry.hardExpireAt);
    this.softBoundMs = Math.min(this.softBoundMs, isFresh(entry, now) ? entry.softExpireAt : now);
  }

  /**
   * True when `key` is this load's key or one it runs inside (reading it would wait for itself).
   */
  includes(key: string): boolean {
    return this.key === key || (this.parent?.includes(key) ?? false);
  }
}

/**
 * The scopes of the loaders running in this process, for one engine: which one the current async
 * context runs inside, and which loads wait on which keys (for cycles between concurrent loads).
 *
 * AsyncLocalStorage makes every promise of the process a little slower while it is enabled (on
 * Node 20 it installs a promise hook), so it is enabled only while a loader runs and disabled as
 * soon as none does: hits pay nothing.
 */
export class LoadScopes {
  readonly #storage = new AsyncLocalStorage<LoadScope>();
  /** Scopes of the loaders running now, by key. Written by `run` only. */
  readonly #running = new Map<string, Set<LoadScope>>();
  #count = 0;

  /** The open scope of the loader this code runs inside, if any. */
  current(): LoadScope | undefined {
    if (this.#count === 0) return undefined;
    const scope = this.#storage.getStore();
    return scope === undefined || scope.closed ? undefined : scope;
  }

  /**
   * Starts `load` (a loader) inside `scope` and returns what it returned; `end()` must be called
   * once the load is over (settled, or abandoned after its timeout).
   */
  start<T>(scope: LoadScope, load: () => T): { readonly result: T; end(): void } {
    let scopes = this.#running.get(scope.key);
    if (scopes === undefined) this.#running.set(scope.key, (scopes = new Set()));
    scopes.add(scope);
    this.#count += 1;
    const end = (): void => {
      if (scope.closed) return;
      scope.closed = true;
      scopes.delete(scope);
      if (scopes.size === 0) this.#running.delete(scope.key);
      this.#count -= 1;
      if (this.#count === 0) this.#storage.disable();
    };
    try {
      return { result: this.#storage.run(scope, load), end };
    } catch (error) {
      end();
      throw error;
    }
  }

  /**
   * True when `scope` reading `key` would wait for itself: `key` is loaded (here) by a loader that
   * waits, directly or through others, on a key `scope` is loading.
   */
  cycles(scope: LoadScope, key: string): boolean {
    const seen = new Set<string>();
    const pending = [key];
    for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
      if (scope.includes(next)) return true;
      if (seen.has(next)) continue;
      seen.add(next);
      for (const other of this.#running.get(next) ?? []) pending.push(...other.waitingOn);
    }
    return false;
  }
}
