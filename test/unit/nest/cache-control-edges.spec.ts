import { describe, expect, it } from '@jest/globals';
import {
  cacheControlLifetime,
  expiresLifetimeMs,
  forbidsStoring,
} from '../../../lib/interceptors/cached-response.js';

/*
 * Edge cases of a handler's Cache-Control read as a shared cache (RFC 9111), for
 * @CachedRoute({ ttlFromCacheControl: true }) and for what the interceptor refuses to store.
 */
describe('Cache-Control edge cases', () => {
  it('caps a lifetime too large to represent at 2^31 seconds (RFC 9111 §1.2.2)', () => {
    const lifetime = cacheControlLifetime('max-age=99999999999999999999');
    expect(lifetime).toBeDefined();
    expect(lifetime!.softMs).toBeLessThanOrEqual(2_147_483_648 * 1_000);
    const stale = cacheControlLifetime('max-age=60, stale-while-revalidate=99999999999999999999');
    expect(stale!.staleMs).toBeLessThanOrEqual(2_147_483_648 * 1_000);
  });

  it('does not store a response whose first max-age is 0 (RFC 9111 §4.2.1: first occurrence, or stale)', () => {
    expect(forbidsStoring('max-age=0, max-age=60', false)).toBe(true);
  });

  it('does not store a response whose only lifetime is invalid (negative): it is stale (RFC 9111 §4.2.1)', () => {
    expect(forbidsStoring('max-age=-1', false)).toBe(true);
  });

  it('reads Expires as a lifetime from the Date the response carries, else from now (RFC 9111 §4.2.1)', () => {
    const date = 'Sun, 06 Nov 1994 08:49:37 GMT';
    const now = Date.parse(date);
    expect(expiresLifetimeMs('Sun, 06 Nov 1994 08:50:37 GMT', undefined, date, 0)).toBe(60_000);
    expect(expiresLifetimeMs('Sunday, 06-Nov-94 08:50:37 GMT', undefined, undefined, now)).toBe(
      60_000,
    );
    expect(expiresLifetimeMs('Sun Nov  6 08:50:37 1994', undefined, undefined, now)).toBe(60_000);
  });

  it.each(['0', '-1', '', 'tomorrow', '2099-01-01'])(
    'reads an Expires that is no HTTP-date (%p) as expired already (RFC 9111 §5.3)',
    (expires) => {
      expect(expiresLifetimeMs(expires, 'public', undefined, Date.now())).toBe(0);
    },
  );

  it('ignores Expires when the response has a max-age or an s-maxage (RFC 9111 §5.3)', () => {
    expect(expiresLifetimeMs('0', 'public, max-age=60', undefined, 0)).toBeUndefined();
    expect(expiresLifetimeMs('0', 's-maxage=60', undefined, 0)).toBeUndefined();
    expect(cacheControlLifetime('stale-while-revalidate=30', 60_000)).toEqual({
      softMs: 60_000,
      staleMs: 30_000,
    });
  });
});
