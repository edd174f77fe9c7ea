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
      const key = roll < 0.3 ? 'a' : roll < 0.5 ? 'b' : roll < 0.6 ? 'c' : `cold${Math.floor(random() * 10_000)}`;
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
