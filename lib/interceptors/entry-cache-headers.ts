import type { ReadResult } from '../core/herd-engine.js';
import { cacheHeaders } from './cache-headers.js';

/** The cache headers of one answer, as `[name, value]` pairs, in the order they are set. */
export type CacheHeaderLines = ReadonlyArray<readonly [string, string]>;

/** The last headers made for one entry, and what they were made from. */
interface Made {
  readonly path: ReadResult<unknown>['path'];
  readonly scoped: boolean;
  readonly createdAt: number;
  readonly softExpireAt: number;
  readonly hardExpireAt: number;
  /** Whole seconds since the load, the `Age` the lines carry. */
  readonly age: number;
  readonly lines: CacheHeaderLines;
}

/**
 * The {@link cacheHeaders} of the answers from one stored entry: they change only when its `Age`
 * (whole seconds) or the read's path does, so they are made once per entry and second, not per
 * hit. An entry read from the cache is the same object on every hit; a bare value (a cached "not
 * found") gets its headers made each time.
 */
export class EntryCacheHeaders {
  readonly #made = new WeakMap<object, Made>();

  of(result: ReadResult<unknown>, now: number, scoped: boolean): CacheHeaderLines {
    const { value, path, createdAt, softExpireAt, hardExpireAt } = result;
    if (typeof value !== 'object' || value === null) return linesOf(result, now, scoped);
    const age = Math.max(0, Math.floor((now - createdAt) / 1_000));
    const made = this.#made.get(value);
    if (
      made !== undefined &&
      made.age === age &&
      made.path === path &&
      made.scoped === scoped &&
      made.createdAt === createdAt &&
      made.softExpireAt === softExpireAt &&
      made.hardExpireAt === hardExpireAt
    ) {
      return made.lines;
    }
    const lines = linesOf(result, now, scoped);
    this.#made.set(value, { path, scoped, createdAt, softExpireAt, hardExpireAt, age, lines });
    return lines;
  }
}

function linesOf(result: ReadResult<unknown>, now: number, scoped: boolean): CacheHeaderLines {
  const headers = cacheHeaders(result, now, scoped);
  return [
    ['X-Cache', headers['X-Cache']],
    ['Age', headers.Age],
    ['Cache-Control', headers['Cache-Control']],
  ];
}
