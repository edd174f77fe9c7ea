import { describe, expect, it } from '@jest/globals';
import {
  cacheControlLifetime,
  forbidsStoring,
  isCachedResponse,
  replayedHeaders,
} from '../../../lib/interceptors/cached-response.js';

describe('what the interceptor may store', () => {
  it.each([
    ['no-store', false, true],
    ['private, no-store', true, true],
    ['No-Cache', false, true],
    ['no-cache="Set-Cookie"', false, true],
    ['private', false, true],
    ['private, max-age=60', true, false],
    ['public, max-age=60', false, false],
    ['max-age=0, must-revalidate', false, true],
    ['max-age=0', false, true],
    ['proxy-revalidate, max-age=0', false, true],
    ['public, max-age=60, s-maxage=0', false, true],
    ['S-MaxAge=0', false, true],
    ['max-age=0, s-maxage=60, must-revalidate', false, false],
    ['max-age=60, must-revalidate', false, false],
    ['max-age="60"', false, false],
  ])(
    'reads Cache-Control: %s (scoped route: %s) as forbidding storage: %s',
    (header, scoped, forbidden) => {
      expect(forbidsStoring(header, scoped)).toBe(forbidden);
    },
  );

  it('allows storing a response without Cache-Control', () => {
    expect(forbidsStoring(undefined, false)).toBe(false);
  });

  it('keeps every header the handler set about the body, and none that belong to one client, one hop or one response', () => {
    const set = {
      'x-total-count': '42',
      'content-type': 'application/json',
      link: '</orders?page=2>; rel="next"',
      'cache-control': 'public, max-age=5',
      'set-cookie': 'sid=1',
      connection: 'close, x-trace',
      'x-trace': 'abc',
      'keep-alive': 'timeout=5',
      'transfer-encoding': 'chunked',
      upgrade: 'websocket',
      te: 'trailers',
      date: 'Tue, 01 Dec 2026 16:00:00 GMT',
      'content-length': '12',
      age: '3',
      'x-cache': 'HIT',
      vary: 'Accept-Language',
    };
    expect(replayedHeaders(set)).toEqual({
      'x-total-count': '42',
      'content-type': 'application/json',
      link: '</orders?page=2>; rel="next"',
      'cache-control': 'public, max-age=5',
    });
  });

  it('tells a stored response from a bare body', () => {
    expect(isCachedResponse({ status: 200, body: { a: 1 } })).toBe(true);
    expect(
      isCachedResponse({ status: 404, body: 'x', headers: { 'content-type': 'text/plain' } }),
    ).toBe(true);
    expect(isCachedResponse({ status: 200, body: 1, extra: true })).toBe(false);
    expect(isCachedResponse({ body: 1 })).toBe(false);
    expect(isCachedResponse([200])).toBe(false);
    expect(isCachedResponse(null)).toBe(false);
  });
});

describe('the lifetime a handler gives its response (ttlFromCacheControl)', () => {
  it.each([
    ['public, max-age=120', { softMs: 120_000, staleMs: undefined }],
    ['max-age=3600, S-MaxAge=60', { softMs: 60_000, staleMs: 0 }],
    ['s-maxage=60, stale-while-revalidate=30', { softMs: 60_000, staleMs: 30_000 }],
    ['max-age="30", stale-while-revalidate=15', { softMs: 30_000, staleMs: 15_000 }],
    ['max-age=30, Must-Revalidate', { softMs: 30_000, staleMs: 0 }],
    ['max-age=30, proxy-revalidate, stale-while-revalidate=15', { softMs: 30_000, staleMs: 0 }],
    ['max-age=abc, s-maxage=-5', undefined],
    ['no-transform', undefined],
    [undefined, undefined],
  ])('reads %j as %j', (header, lifetime) => {
    expect(cacheControlLifetime(header)).toEqual(lifetime);
  });
});
