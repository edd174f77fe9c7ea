import { describe, expect, it } from '@jest/globals';
import { flush } from '../../helpers/deferred.js';
import { engineWithClock } from '../../helpers/engine.js';

describe('HerdEngine backoff after loader failures', () => {
  it('serves stale while the loader fails and spaces refresh attempts by the backoff', async () => {
    const { engine, clock } = engineWithClock({
      soft: '100ms',
      hard: '1h',
      jitter: 0,
      backoff: { initial: '100ms', max: '400ms' },
    });
    await engine.getOrLoad('k', () => 'good');
    clock.advance(200);
    const attemptsAt: number[] = [];
    const failing = (): Promise<string> => {
      attemptsAt.push(clock.now());
      return Promise.reject(new Error('backend down'));
    };
    const values: string[] = [];
    for (let step = 0; step < 2_000; step += 1) {
      values.push(await engine.getOrLoad('k', failing));
      await flush();
      clock.advance(1);
    }
    expect(values.every((value) => value === 'good')).toBe(true);
    const gaps = attemptsAt.slice(1).map((at, i) => at - attemptsAt[i]!);
    // random() is 0.5: delays are 75, 150, 300, then capped at 300 ms.
    expect(gaps.slice(0, 3)).toEqual([75, 150, 300]);
    expect(gaps.slice(3).every((gap) => gap === 300)).toBe(true);
    expect(attemptsAt.length).toBeLessThanOrEqual(9);
    expect(engine.stats().staleOnError).toBe(attemptsAt.length);
  });

  it('releases a lease held for backoff when the key is deleted, so the next read loads at once', async () => {
    const { engine, clock } = engineWithClock({
      soft: '1s',
      hard: '1h',
      jitter: 0,
      waitTimeout: '50ms',
    });
    await engine.getOrLoad('k', () => 'v1');
    clock.advance(2_000);
    const failed = await engine.read('k', () => Promise.reject(new Error('db down')));
    await failed.revalidated; // the owner now holds the lease for the backoff delay
    await engine.delete('k');
    await expect(engine.getOrLoad('k', () => 'reloaded')).resolves.toBe('reloaded');
  });
});
