import type { Duration } from './duration.js';
import { type Entry, isNegative } from './entry.js';
import type { ReadPath } from './events.js';
import type { CachePolicy } from './policy.js';

export interface ReadOptions {
  /** Overrides the default policy for this call (merged field by field). */
  readonly policy?: CachePolicy;
  /** Tags stored with a loaded value, for group invalidation. */
  readonly tags?: readonly string[];
  /** Stop waiting when this fires; the shared load goes on for other callers. */
  readonly signal?: AbortSignal;
  /** Stop waiting after this long; a servable stale value is returned if there is one. */
  readonly timeout?: Duration;
}

/** The answer to one read, with the entry's timing (for `Age` and `Cache-Control`). */
export interface ReadResult<T> {
  readonly value: T;
  readonly path: ReadPath;
  /** A cached "not found". */
  readonly negative: boolean;
  /** The key's version the value belongs to (store-assigned; usable as an ETag). */
  readonly version: number;
  readonly createdAt: number;
  readonly softExpireAt: number;
  readonly hardExpireAt: number;
  /**
   * On a stale read: settles when the background refresh ends, with the new value, or `undefined`
   * when no newer value was written (refresh failed, backing off, or refreshed elsewhere). Never
   * rejects.
   */
  readonly revalidated?: Promise<ReadResult<T> | undefined>;
}

export function toResult<T>(
  entry: Entry<T>,
  path: ReadPath,
  revalidated?: Promise<ReadResult<T> | undefined>,
): ReadResult<T> {
  return {
    value: entry.value,
    path,
    negative: isNegative(entry),
    version: entry.version,
    createdAt: entry.createdAt,
    softExpireAt: entry.softExpireAt,
    hardExpireAt: entry.hardExpireAt,
    revalidated,
  };
}

/**
 * Whether two tag lists name the same tags in the same order (callers sharing a read need both).
 */
export function sameTags(
  a: readonly string[] | undefined,
  b: readonly string[] | undefined,
): boolean {
  if (a === b) return true;
  if (a === undefined || b === undefined || a.length !== b.length) return false;
  return a.every((tag, i) => tag === b[i]);
}
