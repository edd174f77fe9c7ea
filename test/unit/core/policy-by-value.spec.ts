import { describe, expect, it } from '@jest/globals';
import { type CachePolicy, HerdEngine } from '../../../lib/index.js';

/**
 * Policies written inline are resolved once per set of values. DESIGN (Quality bar): "Bad input gets
 * a clear error at the place it enters"; the fingerprint must not let an invalid policy share the
 * resolution of a valid one.
 */
describe('per-call policies resolved by value', () => {
  it('refuses a backoff duration without a unit, also after a policy with the same number of milliseconds was used', () => {
    // As read from an environment variable: a string, not a number of milliseconds.
    const fromEnvironment = { backoff: { initial: '5000' } } as unknown as CachePolicy;
    expect(() => new HerdEngine().policyFor(fromEnvironment)).toThrow(/policy\.backoff\.initial/);

    const engine = new HerdEngine();
    engine.policyFor({ backoff: { initial: 5_000 } });
    expect(() => engine.policyFor({ backoff: { initial: '5000' } } as unknown as CachePolicy)).toThrow(
      /policy\.backoff\.initial/,
    );
  });
});
