import type { CachePolicy } from '../core/policy.js';
import type { HerdLoader } from './herd-loader.interface.js';

/** One key to load ahead of traffic with `herd.warm()`. */
export interface WarmEntry<T = unknown> {
  readonly key: string;
  readonly loader: HerdLoader<T>;
  readonly policy?: CachePolicy;
  readonly tags?: readonly string[];
}

export interface WarmOptions {
  /** Loads running at once. Default 4. */
  readonly concurrency?: number;
}

/** What `herd.warm()` did. A failed key does not stop the others. */
export interface WarmReport {
  readonly warmed: number;
  readonly failed: ReadonlyArray<{ readonly key: string; readonly error: unknown }>;
}
