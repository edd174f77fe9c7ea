import type { FillWatch } from '../core/herd-store.interface.js';

/**
 * In-process registry of followers waiting for a key to be filled. A store calls `notify(key)`
 * when the key is written or its lease released (locally, or on a message from another process).
 */
export class FillSignals {
  /** Written by `watch` (add) and a watcher's `close` (remove). */
  readonly #watchers = new Map<string, Set<Watcher>>();

  /** Registered watchers across all keys (0 when nobody waits). */
  get size(): number {
    let count = 0;
    for (const set of this.#watchers.values()) count += set.size;
    return count;
  }

  watch(key: string): FillWatch {
    let set = this.#watchers.get(key);
    if (set === undefined) {
      set = new Set();
      this.#watchers.set(key, set);
    }
    const watcher = new Watcher(() => {
      const current = this.#watchers.get(key);
      if (current === undefined) return;
      current.delete(watcher);
      if (current.size === 0) this.#watchers.delete(key);
    });
    set.add(watcher);
    return watcher;
  }

  /** True while a follower watches `key`. */
  has(key: string): boolean {
    return this.#watchers.has(key);
  }

  notify(key: string): void {
    const set = this.#watchers.get(key);
    if (set === undefined) return;
    for (const watcher of set) watcher.signal();
  }

  /** Wakes every watcher (used on close so nobody waits for a store that is gone). */
  notifyAll(): void {
    for (const set of this.#watchers.values()) for (const watcher of set) watcher.signal();
  }
}

class Watcher implements FillWatch {
  /** Set by `signal` when no `next` was waiting; consumed by the following `next`. */
  #pendingSignal = false;
  #wake: ((filled: boolean) => void) | undefined;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(private readonly unregister: () => void) {}

  next(timeoutMs: number): Promise<boolean> {
    if (this.#pendingSignal || this.#closed) {
      this.#pendingSignal = false;
      return Promise.resolve(!this.#closed);
    }
    this.#settle(false);
    return new Promise<boolean>((resolve) => {
      this.#wake = resolve;
      this.#timer = setTimeout(() => this.#settle(false), timeoutMs);
    });
  }

  signal(): void {
    if (this.#wake === undefined) this.#pendingSignal = true;
    else this.#settle(true);
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#settle(false);
    this.unregister();
  }

  #settle(filled: boolean): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.(filled);
  }
}
