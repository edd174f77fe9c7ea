import { LRUCache } from 'lru-cache';

interface BackoffState {
  /** Consecutive failures since the last success. */
  readonly failures: number;
  /** Epoch ms before which no new refresh attempt is made. */
  readonly retryAt: number;
  /**
   * The key's version when the last attempt failed: a newer version (an invalidation) ends the
   * backoff.
   */
  readonly version: number;
}

export interface BackoffDelays {
  readonly initialMs: number;
  readonly maxMs: number;
  /** Failures of the key another process recorded before (the delay grows cluster-wide). */
  readonly failuresBefore?: number;
}

/**
 * Per-key refresh backoff after loader failures: exponential with "equal jitter" (half fixed,
 * half random), capped. Bounded: the least recently failing keys are forgotten first.
 */
export class Backoff {
  readonly #states: LRUCache<string, BackoffState>;

  constructor(
    private readonly random: () => number = Math.random,
    maxKeys = 10_000,
  ) {
    this.#states = new LRUCache({ max: maxKeys });
  }

  /** Keys currently remembered as failing. */
  get size(): number {
    return this.#states.size;
  }

  /** True while `key`, seen at `version`, must not be refreshed again. */
  isBackingOff(key: string, now: number, version: number): boolean {
    const state = this.#states.get(key);
    return state !== undefined && now < state.retryAt && version <= state.version;
  }

  /**
   * Records a failure at `version`; returns the delay (ms) before the next attempt and the failure
   * count.
   */
  recordFailure(
    key: string,
    now: number,
    version: number,
    delays: BackoffDelays,
  ): { delayMs: number; failures: number } {
    const failures = Math.max(this.#states.get(key)?.failures ?? 0, delays.failuresBefore ?? 0) + 1;
    const ceiling = Math.min(delays.maxMs, delays.initialMs * 2 ** Math.min(failures - 1, 30));
    const delayMs = Math.round(ceiling / 2 + (ceiling / 2) * this.random());
    this.#states.set(key, { failures, retryAt: now + delayMs, version });
    return { delayMs, failures };
  }

  recordSuccess(key: string): void {
    this.#states.delete(key);
  }
}
