import { describe, expect, it } from '@jest/globals';
import { estimateHeapBytes } from '../../../lib/stores/redis/heap-size.js';

describe('estimateHeapBytes', () => {
  it('charges a decoded value more than its serialized form when its parts are objects', () => {
    const dates = Array.from({ length: 500 }, (_, i) => new Date(i));
    // 500 dates serialize to about 4.5 KB; in the heap each is an object.
    expect(estimateHeapBytes(dates, 6_000)).toBeGreaterThan(500 * 64);
  });

  it('counts strings by length, maps and sets by entries, binary data by bytes', () => {
    expect(estimateHeapBytes('x'.repeat(1_000), 0)).toBeGreaterThanOrEqual(1_000);
    const map = new Map(Array.from({ length: 100 }, (_, i) => [i, i] as const));
    expect(estimateHeapBytes(map, 0)).toBeGreaterThan(estimateHeapBytes(new Map(), 0) + 100 * 16);
    expect(estimateHeapBytes(Buffer.alloc(10_000), 0)).toBeGreaterThanOrEqual(10_000);
  });

  it('counts a shared or cyclic part once, and ends', () => {
    const shared = { text: 'y'.repeat(1_000) };
    const cyclic: Record<string, unknown> = { a: shared, b: shared };
    cyclic['self'] = cyclic;
    const once = estimateHeapBytes({ a: shared }, 0);
    expect(estimateHeapBytes(cyclic, 0)).toBeLessThan(once + 200);
  });

  it('prices what it does not visit of a very large value from its serialized size', () => {
    const large = Array.from({ length: 200_000 }, (_, i) => i);
    expect(estimateHeapBytes(large, 1_000_000)).toBeGreaterThanOrEqual(8 * 1_000_000);
  });

  it('does not walk the holes of a sparse array, nor build a pending list longer than its bound', () => {
    const byId: unknown[] = [];
    byId[2 ** 32 - 2] = { name: 'last' };
    expect(estimateHeapBytes(byId, 36)).toBe(8 * 36);
    const nested = { pages: [byId, new Map([[1, byId]])] };
    expect(estimateHeapBytes(nested, 60)).toBeLessThan(10_000);
    const wide = new Set(Array.from({ length: 150_000 }, (_, i) => i));
    expect(estimateHeapBytes(wide, 500_000)).toBe(8 * 500_000);
  });
});
