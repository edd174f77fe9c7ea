import type { Entry } from './entry.js';

/** A holder is deemed stuck after this many times the usual load time of its key... */
export const STUCK_FACTOR = 4;
/** ...but never before this long (a short hiccup of the backend is not a hung load). */
export const MIN_STUCK_MS = 1_000;
/** Keys whose load time is remembered; the least recently recorded go first. */
export const REMEMBERED_KEYS = 1_000;
/** Weight of the newest load in a key's usual load time. */
const NEWEST_WEIGHT = 0.25;

interface Usual {
  /** The smoothed load time (ms). */
  readonly ms: number;
  /** The version of the entry last recorded (each load is counted once). */
  readonly version: number;
}

/**
 * How long loads of each key usually take, as this process saw them: from the load time every
 * entry carries (`loadMs`), whoever loaded it, recorded when a fill of the key ends here or starts
 * with a value in hand. Bounded: at most {@link REMEMBERED_KEYS} keys.
 */
export class LoadDurations {
  readonly #usual = new Map<string, Usual>();
  readonly #capacity: number;

  constructor(capacity = REMEMBERED_KEYS) {
    this.#capacity = capacity;
  }

  /** Keys remembered now. */
  get size(): number {
    return this.#usual.size;
  }

  /** Counts the load that made `entry` (once per version; not a value written with set()). */
  record(key: string, entry: Entry): void {
    // A value written with set() carries no load time: it says nothing about how long loads take.
    if (entry.loadMs <= 0) return;
    const known = this.#usual.get(key);
    if (known !== undefined && known.version === entry.version) return;
    const ms =
      known === undefined ? entry.loadMs : known.ms + NEWEST_WEIGHT * (entry.loadMs - known.ms);
    // Re-inserted, so the map's order is the order of last use.
    this.#usual.delete(key);
    this.#usual.set(key, { ms, version: entry.version });
    if (this.#usual.size > this.#capacity) {
      const oldest = this.#usual.keys().next();
      if (oldest.done !== true) this.#usual.delete(oldest.value);
    }
  }

  /** The usual load time of `key`, or `undefined` when no load of it was seen. */
  usualMs(key: string): number | undefined {
    return this.#usual.get(key)?.ms;
  }

  /**
   * How long a lease holder of `key` may load without progress before a follower takes it over:
   * {@link STUCK_FACTOR} times the key's usual load time, at least {@link MIN_STUCK_MS} (also the
   * answer for a key whose loads were never seen here: the hedge budget bounds what an early
   * takeover of a cold key can cost), at most `waitTimeoutMs`.
   */
  stuckAfterMs(key: string, waitTimeoutMs: number): number {
    const usual = this.usualMs(key) ?? 0;
    return Math.min(waitTimeoutMs, Math.max(MIN_STUCK_MS, STUCK_FACTOR * usual));
  }
}
