import { describe, expect, it } from '@jest/globals';
import type { ReadResult } from '../../../lib/core/herd-engine.js';
import { cacheHeaders } from '../../../lib/interceptors/cache-headers.js';
import { EntryCacheHeaders } from '../../../lib/interceptors/entry-cache-headers.js';

const entry = { status: 200, body: { id: 1 } };

function result(path: ReadResult<unknown>['path'], value: unknown = entry): ReadResult<unknown> {
  return {
    value,
    path,
    negative: false,
    version: 1,
    createdAt: 10_000,
    softExpireAt: 70_000,
    hardExpireAt: 130_000,
  };
}

describe('EntryCacheHeaders', () => {
  it('makes the headers of an entry once per second of Age, as cacheHeaders does', () => {
    const heads = new EntryCacheHeaders();
    const first = heads.of(result('fresh'), 15_100, false);
    expect(Object.fromEntries(first)).toEqual(cacheHeaders(result('fresh'), 15_100, false));
    expect(heads.of(result('fresh'), 15_900, false)).toBe(first);
    const later = heads.of(result('fresh'), 16_000, false);
    expect(later).not.toBe(first);
    expect(Object.fromEntries(later)).toEqual(cacheHeaders(result('fresh'), 16_000, false));
  });

  it('makes them again for another path, scope or entry times, and for a bare value', () => {
    const heads = new EntryCacheHeaders();
    heads.of(result('fresh'), 15_000, false);
    for (const [read, scoped] of [
      [result('stale'), false],
      [result('fresh'), true],
      [{ ...result('fresh'), createdAt: 11_000 }, false],
      [result('fresh', null), false],
    ] as const) {
      expect(Object.fromEntries(heads.of(read, 15_000, scoped))).toEqual(
        cacheHeaders(read, 15_000, scoped),
      );
    }
  });
});
