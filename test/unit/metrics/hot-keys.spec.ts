import { describe, expect, it } from '@jest/globals';
import { HotKeys } from '../../../lib/index.js';

describe('HotKeys', () => {
  it('finds the heaviest keys of a skewed stream in bounded memory', () => {
    const hot = new HotKeys(16);
    let seed = 3;
    const random = (): number => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed / 2_147_483_648;
    };
    for (let i = 0; i < 50_000; i += 1) {
      const roll = random();
      // 30 % "a", 20 % "b", 10 % "c", the rest spread over 10,000 cold keys.
      const key =
        roll < 0.3
          ? 'a'
          : roll < 0.5
            ? 'b'
            : roll < 0.6
              ? 'c'
              : `cold${Math.floor(random() * 10_000)}`;
      hot.add(key);
    }
    const top = hot.top(3);
    expect(top.map((entry) => entry.key)).toEqual(['a', 'b', 'c']);
    expect(top[0]!.count - top[0]!.error).toBeLessThanOrEqual(15_500);
    expect(top[0]!.count).toBeGreaterThanOrEqual(14_500);
    expect(hot.top(100).length).toBe(16);
  });

  it('is exact while the distinct keys fit', () => {
    const hot = new HotKeys(4);
    for (const key of ['x', 'y', 'x', 'z', 'x', 'y']) hot.add(key);
    expect(hot.top(2)).toEqual([
      { key: 'x', count: 3, error: 0 },
      { key: 'y', count: 2, error: 0 },
    ]);
  });
});

describe('HotKeys at scale', () => {
  it('matches an exact count of every key while the distinct keys fit, at 10,000 counters', () => {
    const hot = new HotKeys(10_000);
    const exact = new Map<string, number>();
    let seed = 7;
    for (let i = 0; i < 100_000; i += 1) {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      const key = `k${seed % 5_000}`;
      hot.add(key);
      exact.set(key, (exact.get(key) ?? 0) + 1);
    }
    const top = hot.top(10_000);
    expect(top).toHaveLength(exact.size);
    for (const { key, count, error } of top) {
      expect(count).toBe(exact.get(key));
      expect(error).toBe(0);
    }
    for (let i = 1; i < top.length; i += 1)
      expect(top[i - 1]!.count).toBeGreaterThanOrEqual(top[i]!.count);
  });

  it('replaces a smallest counter and keeps the error bound when full', () => {
    const hot = new HotKeys(2);
    for (const key of ['a', 'a', 'a', 'b', 'c']) hot.add(key);
    expect(hot.top(2)).toEqual([
      { key: 'a', count: 3, error: 0 },
      { key: 'c', count: 2, error: 1 },
    ]);
  });

  it('refuses a capacity it cannot bound', () => {
    expect(() => new HotKeys(0)).toThrow(RangeError);
    expect(() => new HotKeys(10_001)).toThrow(/10000/);
  });
});
