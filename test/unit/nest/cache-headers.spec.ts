import { describe, expect, it } from '@jest/globals';
import { cacheHeaders } from '../../../lib/index.js';

const createdAt = 1_700_000_000_000;
const entry = { createdAt, softExpireAt: createdAt + 30_000, hardExpireAt: createdAt + 300_000 };

describe('cache headers', () => {
  it('sends max-age = soft lifetime and stale-while-revalidate = hard - soft on a miss', () => {
    expect(cacheHeaders({ ...entry, path: 'miss' }, createdAt)).toEqual({
      'X-Cache': 'MISS',
      Age: '0',
      'Cache-Control': 'max-age=30, stale-while-revalidate=270',
    });
  });

  it('counts Age from the load, so max-age minus Age is the freshness left', () => {
    const headers = cacheHeaders({ ...entry, path: 'fresh' }, createdAt + 12_900);
    expect(headers['X-Cache']).toBe('HIT');
    expect(headers.Age).toBe('12');
    expect(headers['Cache-Control']).toBe('max-age=30, stale-while-revalidate=270');
  });

  it('tells a downstream cache that a STALE body is past max-age but inside the stale window', () => {
    const headers = cacheHeaders({ ...entry, path: 'stale' }, createdAt + 45_000);
    expect(headers['X-Cache']).toBe('STALE');
    expect(Number(headers.Age)).toBeGreaterThan(30);
    expect(Number(headers.Age)).toBeLessThan(300);
  });

  it('rounds down to whole seconds and marks scoped responses private', () => {
    const headers = cacheHeaders(
      {
        path: 'fresh',
        createdAt,
        softExpireAt: createdAt + 1_999,
        hardExpireAt: createdAt + 3_500,
      },
      createdAt + 999,
      true,
    );
    expect(headers).toEqual({
      'X-Cache': 'HIT',
      Age: '0',
      'Cache-Control': 'private, max-age=1, stale-while-revalidate=1',
    });
  });
});
