import { describe, expect, it } from '@jest/globals';
import {
  ConfigurationError,
  type CachePolicy,
  parseDuration,
  resolvePolicy,
} from '../../../lib/index.js';
import { memoryEngine } from '../../helpers/engine.js';

function fieldOf(run: () => unknown): string | undefined {
  try {
    run();
  } catch (error) {
    if (error instanceof ConfigurationError) return error.field;
    throw error;
  }
  return undefined;
}

describe('durations', () => {
  it.each([
    [250, 250],
    ['250ms', 250],
    ['30s', 30_000],
    ['1.5s', 1_500],
    ['5m', 300_000],
    ['2h', 7_200_000],
    ['1d', 86_400_000],
    ['10 s', 10_000],
  ])('parses %p as %p ms', (input, ms) => {
    expect(parseDuration(input, 'x')).toBe(ms);
  });

  it.each([
    [-1],
    [Number.NaN],
    [Number.POSITIVE_INFINITY],
    ['5 minutes'],
    ['10'],
    ['s'],
    [''],
    [true],
    [null],
  ])('rejects %p with a ConfigurationError naming the field', (input) => {
    expect(fieldOf(() => parseDuration(input, 'policy.soft'))).toBe('policy.soft');
  });
});

describe('resolvePolicy', () => {
  it('fills defaults: soft 30 s, hard 10 x soft, jitter 10 %', () => {
    expect(resolvePolicy(undefined)).toMatchObject({
      softMs: 30_000,
      hardMs: 300_000,
      jitter: { kind: 'fraction', fraction: 0.1 },
      negativeTtlMs: 10_000,
      leaseTtlMs: 5_000,
      waitTimeoutMs: 5_000,
      onWaitTimeout: 'error',
      staleWhileRevalidate: true,
      loaderSoftTimeoutMs: undefined,
      loaderHardTimeoutMs: 30_000,
      backoffInitialMs: 1_000,
      backoffMaxMs: 30_000,
      earlyRefreshBeta: 0,
    });
  });

  it('layers a per-call policy over the base, field by field', () => {
    const resolved = resolvePolicy(
      { soft: '5s' },
      { soft: '1m', hard: '10m', leaseTtl: '2s', backoff: { max: '1m' } },
    );
    expect(resolved).toMatchObject({
      softMs: 5_000,
      hardMs: 600_000,
      leaseTtlMs: 2_000,
      backoffInitialMs: 1_000,
      backoffMaxMs: 60_000,
    });
  });

  it('accepts a duration as jitter', () => {
    expect(resolvePolicy({ jitter: '5s' }).jitter).toEqual({ kind: 'duration', ms: 5_000 });
  });

  it.each<[CachePolicy, string]>([
    [{ soft: '5s', hard: '1s' }, 'policy.hard'],
    [{ soft: 0 }, 'policy.soft'],
    [{ soft: -5 }, 'policy.soft'],
    [{ soft: Number.NaN }, 'policy.soft'],
    [{ hard: '3 fortnights' as never }, 'policy.hard'],
    [{ jitter: 1.5 }, 'policy.jitter'],
    [{ jitter: -0.1 }, 'policy.jitter'],
    [{ leaseTtl: 0 }, 'policy.leaseTtl'],
    [{ waitTimeout: 'soon' as never }, 'policy.waitTimeout'],
    [{ onWaitTimeout: 'retry' as never }, 'policy.onWaitTimeout'],
    [{ staleWhileRevalidate: 'yes' as never }, 'policy.staleWhileRevalidate'],
    [{ loaderHardTimeout: 0 }, 'policy.loaderHardTimeout'],
    [{ backoff: { initial: '10s', max: '1s' } }, 'policy.backoff.max'],
    [{ earlyRefresh: -1 }, 'policy.earlyRefresh'],
    [{ sofft: '1s' } as never, 'policy.sofft'],
  ])('rejects %p naming %s', (policy, field) => {
    expect(fieldOf(() => resolvePolicy(policy))).toBe(field);
  });

  it('fails engine construction on an invalid default policy', () => {
    expect(() => memoryEngine({ policy: { soft: '1m', hard: '30s' } })).toThrow(/policy\.hard/);
  });

  it('rejects an invalid per-call policy on the call, typed', async () => {
    const engine = memoryEngine();
    await expect(
      engine.getOrLoad('k', () => 1, { policy: { soft: 'forever' as never } }),
    ).rejects.toMatchObject({
      code: 'HERD_GUARD_CONFIG',
      field: 'policy.soft',
    });
  });
});
