import type { HerdEngine } from '../core/herd-engine.js';
import { type HotKey, HotKeys } from './hot-keys.js';

/** The hottest keys of one cache, kept in bounded memory and never exported as metric labels. */
export interface HotKeysSnapshot {
  /** Most read keys (any path). */
  readonly requested: readonly HotKey[];
  /** Most loaded keys (misses and refreshes, successful or not). */
  readonly refreshed: readonly HotKey[];
}

/**
 * Follows an engine's reads and loads and keeps the top keys of each (Space-Saving). Reads are
 * counted in place, once per answer (no event per read); loads from the engine's events.
 */
export class HotKeyTracker {
  readonly #requested: HotKeys;
  readonly #refreshed: HotKeys;
  readonly #unsubscribe: () => void;
  readonly #stopCounting: () => void;

  constructor(engine: HerdEngine, capacity: number) {
    this.#requested = new HotKeys(capacity);
    this.#refreshed = new HotKeys(capacity);
    this.#stopCounting = engine.countReads(this.#requested);
    this.#unsubscribe = engine.onEvent(
      (event) => {
        if (event.type === 'load-ok' || event.type === 'load-failed')
          this.#refreshed.add(event.key);
      },
      { reads: false },
    );
  }

  snapshot(top = 10): HotKeysSnapshot {
    return { requested: this.#requested.top(top), refreshed: this.#refreshed.top(top) };
  }

  close(): void {
    this.#stopCounting();
    this.#unsubscribe();
  }
}
