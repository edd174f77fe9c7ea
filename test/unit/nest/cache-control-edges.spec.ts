import { describe, expect, it } from '@jest/globals';
import { cacheControlLifetime, forbidsStoring } from '../../../lib/interceptors/cached-response.js';

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
});
