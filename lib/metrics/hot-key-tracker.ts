import type { HerdEngine } from '../core/herd-engine.js';
import { hiddenKey } from '../telemetry/key-attribute.js';
import { type HotKey, HotKeys } from './hot-keys.js';

/**
 * The hottest keys of one cache, kept in bounded memory and never exported as metric labels. Each
 * key is `#` and its hash unless the tracker reports raw keys.
 */
export interface HotKeysSnapshot {
  /** Most read keys (any path). */
  readonly requested: readonly HotKey[];
  /** Most loaded keys (misses and refreshes, successful or not). */
  readonly refreshed: readonly HotKey[];
}

/**
 * Follows an engine's reads and loads and keeps the top keys of each (Space-Saving). Reads are
 * counted in place, once per answer (no event per read); loads from the engine's events. The
 * counters hold raw keys (they never leave the process); a snapshot, which is made to be served,
 * names them by hash unless `rawKeys` is set, by the rule OpenTelemetry spans follow. Only the top
 * keys are hashed, and only when asked for, so a read costs no hash.
 */
export class HotKeyTracker {
  readonly #requested: HotKeys;
  readonly #refreshed: HotKeys;
  readonly #rawKeys: boolean;
  readonly #unsubscribe: () => void;
  readonly #stopCounting: () => void;

  constructor(engine: HerdEngine, capacity: number, options: { readonly rawKeys?: boolean } = {}) {
    this.#rawKeys = options.rawKeys === true;
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
    return {
      requested: this.#published(this.#requested, top),
      refreshed: this.#published(this.#refreshed, top),
    };
  }

  #published(keys: HotKeys, top: number): HotKey[] {
    const hottest = keys.top(top);
    if (this.#rawKeys) return hottest;
    return hottest.map((hot) => ({ ...hot, key: hiddenKey(hot.key) }));
  }

  close(): void {
    this.#stopCounting();
    this.#unsubscribe();
  }
}
