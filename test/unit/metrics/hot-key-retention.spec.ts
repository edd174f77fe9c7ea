import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { HerdEngine, HotKeys, HotKeyTracker, MemoryStore } from '../../../lib/index.js';

/**
 * The garbage collector, driven by the test: `minor` runs a scavenge (young generation only), so
 * what survives it is what something still points at, and what an old object points at survives
 * too, dead or not. No full collection runs while growth is measured.
 */
type Collect = (options?: { type: 'minor' | 'major' }) => void;
let collect: Collect;

beforeAll(() => {
  setFlagsFromString('--expose-gc');
  collect = runInNewContext('gc') as Collect;
});

function oldSpaceUsed(): number {
  return getHeapSpaceStatistics().find((space) => space.space_name === 'old_space')!
    .space_used_size;
}

/**
 * Runs `step` `times` times after a full collection, scavenging every `every` steps, and returns
 * the largest growth of the old generation seen after a scavenge (a full collection V8 may start
 * on its own only lowers later readings, never the largest one before it).
 */
async function largestOldGrowth(
  times: number,
  every: number,
  step: (i: number) => unknown,
): Promise<number> {
  collect({ type: 'major' });
  collect({ type: 'major' });
  const before = oldSpaceUsed();
  let largest = 0;
  for (let i = 0; i < times; i += 1) {
    const pending = step(i);
    if (pending instanceof Promise) await pending;
    if (i % every === every - 1) {
      collect({ type: 'minor' });
      collect({ type: 'minor' });
      largest = Math.max(largest, oldSpaceUsed() - before);
    }
  }
  return largest;
}

const engines: HerdEngine[] = [];
afterEach(async () => {
  await Promise.all(engines.splice(0).map((engine) => engine.close()));
});

describe('hot-key retention', () => {
  it('promotes nothing per count: the old generation stays flat over 100,000 counts', async () => {
    const hot = new HotKeys(64);
    const keys = Array.from({ length: 40 }, (_, i) => `key-${i}`);
    for (const key of keys) hot.add(key);
    // Skewed: half the counts go to one key (whose count climbs past every other one).
    const growth = await largestOldGrowth(100_000, 1_000, (i) =>
      hot.add(i % 2 === 0 ? keys[0]! : keys[i % keys.length]!),
    );
    expect(hot.top(1)[0]!.key).toBe('key-0');
    expect(growth).toBeLessThan(1_000_000);
  });

  it('keeps the old generation flat over 100,000 hits with hot keys tracked', async () => {
    const engine = new HerdEngine({ store: new MemoryStore() });
    engines.push(engine);
    const tracker = new HotKeyTracker(engine, 64);
    const loader = async (): Promise<string> => 'v';
    const keys = Array.from({ length: 40 }, (_, i) => `key-${i}`);
    for (const key of keys) await engine.getOrLoad(key, loader);
    for (let i = 0; i < 5_000; i += 1) await engine.getOrLoad(keys[i % keys.length]!, loader);
    const growth = await largestOldGrowth(100_000, 1_000, (i) =>
      engine.getOrLoad(i % 2 === 0 ? keys[0]! : keys[i % keys.length]!, loader),
    );
    expect(tracker.snapshot(1).requested[0]!.key).toBe('key-0');
    tracker.close();
    expect(growth).toBeLessThan(1_000_000);
  });

  it('retains nothing per distinct key: after a full collection the old generation is back, whether 50,000 or 200,000 keys were counted', () => {
    // A counter that outlives a scavenge keeps its key alive, so keys it replaces later die in the
    // old generation and wait for a full collection (as in any map of keys): growth measured
    // between full collections is that floating garbage. What must not grow is what survives one.
    const retained = (distinct: number): number => {
      const hot = new HotKeys(64);
      // A full collection that also finishes sweeping (`{ type: 'major' }` may leave dead objects
      // counted in unswept pages).
      collect();
      collect();
      const before = oldSpaceUsed();
      for (let i = 0; i < 2 * distinct; i += 1) hot.add(i % 2 === 0 ? 'hot' : `key-${i}`);
      // A full collection that also finishes sweeping (`{ type: 'major' }` may leave dead objects
      // counted in unswept pages).
      collect();
      collect();
      expect(hot.top(1)[0]!.key).toBe('hot');
      expect(hot.buckets.linked + hot.buckets.free).toBeLessThanOrEqual(64);
      return oldSpaceUsed() - before;
    };
    expect(retained(50_000)).toBeLessThan(500_000);
    expect(retained(200_000)).toBeLessThan(500_000);
  });

  it('reuses its buckets: never more than it has counters', () => {
    const hot = new HotKeys(16);
    for (let i = 0; i < 50_000; i += 1) hot.add(`k${(i * 7919) % 300}`, 1 + (i % 3));
    const { linked, free } = hot.buckets;
    expect(linked + free).toBeLessThanOrEqual(16);
  });
});
