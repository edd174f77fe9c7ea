import { describe, expect, it } from '@jest/globals';
import type { CachePolicy, Duration } from '../../../lib/index.js';
import { memoryEngine } from '../../helpers/engine.js';

/**
 * Policies written inline are resolved once per set of values. DESIGN (Quality bar): "Bad input gets
 * a clear error at the place it enters"; the fingerprint must not let an invalid policy share the
 * resolution of a valid one.
 */
describe('per-call policies resolved by value', () => {
  it('refuses a backoff duration without a unit, also after a policy with the same number of milliseconds was used', () => {
    // As read from an environment variable: a string, not a number of milliseconds.
    const fromEnvironment = { backoff: { initial: '5000' } } as unknown as CachePolicy;
    expect(() => memoryEngine().policyFor(fromEnvironment)).toThrow(/policy\.backoff\.initial/);

    const engine = memoryEngine();
    engine.policyFor({ backoff: { initial: 5_000 } });
    expect(() =>
      engine.policyFor({ backoff: { initial: '5000' } } as unknown as CachePolicy),
    ).toThrow(/policy\.backoff\.initial/);
  });

  it('resolves a policy written inline once per set of values, not once per call', () => {
    const engine = memoryEngine({ policy: { soft: '10s' } });
    const first = engine.policyFor({ soft: '1m', backoff: { initial: '2s' } });
    expect(engine.policyFor({ soft: '1m', backoff: { initial: '2s' } })).toBe(first);
    expect(engine.policyFor({ backoff: { initial: '2s' }, soft: '1m' })).toEqual(first);
    expect(engine.policyFor({ soft: '1m', backoff: { initial: '3s' } })).not.toBe(first);
    expect(engine.policyFor({ soft: 60_000 })).not.toBe(first);
    // A bad policy is still refused every time.
    expect(() => engine.policyFor({ soft: '1m', sfot: '2m' } as never)).toThrow(/policy\.sfot/);
    expect(() => engine.policyFor({ soft: '1m', sfot: '2m' } as never)).toThrow(/policy\.sfot/);
  });

  it('matches a new policy object against the values the last one had when it was resolved', () => {
    const engine = memoryEngine();
    const written: { soft: Duration } = { soft: '1m' };
    const first = engine.policyFor(written);
    // The caller reuses its object for something else afterwards.
    written.soft = '2m';
    expect(engine.policyFor({ soft: '1m' })).toBe(first);
    expect(engine.policyFor({ soft: '1m', hard: undefined })).toEqual(first);
    expect(engine.policyFor({ soft: '2m' }).softMs).toBe(120_000);
    expect(() => engine.policyFor({ soft: '2m', hard: '1m' })).toThrow(/policy\.hard/);
    // As many fields as the last policy, one unknown where that one had an unset field.
    engine.policyFor({ soft: '1m', hard: undefined });
    expect(() => engine.policyFor({ soft: '1m', sfot: '2m' } as never)).toThrow(/policy\.sfot/);
  });
});

describe('the serializer chosen per call', () => {
  it('stores with the call policy serializer: json refuses a Date naming its path, v8 (the default) keeps it', async () => {
    const engine = memoryEngine();
    try {
      const since = new Date('2026-01-02T03:04:05Z');
      await expect(
        engine.getOrLoad('strict', async () => ({ customer: { since } }), {
          policy: { serializer: 'json' },
        }),
      ).rejects.toMatchObject({
        name: 'SerializationError',
        message: expect.stringContaining('$.customer.since'),
      });
      const kept = await engine.getOrLoad('typed', async () => ({ customer: { since } }));
      // A Date (made in Node's own realm by v8.deserialize, not the test's: compared by tag).
      expect(Object.prototype.toString.call(kept.customer.since)).toBe('[object Date]');
      expect(kept.customer.since.getTime()).toBe(since.getTime());
      // The same call with strict JSON and a value JSON keeps: stored and read back as written.
      const plain = await engine.getOrLoad('plain', async () => ({ since: since.toISOString() }), {
        policy: { serializer: 'json' },
      });
      expect(plain).toEqual({ since: '2026-01-02T03:04:05.000Z' });
    } finally {
      await engine.close();
    }
  });
});
