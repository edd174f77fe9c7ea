import { describe, expect, it } from '@jest/globals';
import {
  CORRUPT_ENTRY,
  type Entry,
  HerdEngine,
  type HerdEvent,
  MemoryStore,
  type StoreSnapshot,
} from '../../../lib/index.js';
import { ManualClock } from '../../helpers/clock.js';
import { counted } from '../../helpers/counted.js';
import { memoryEngine } from '../../helpers/engine.js';

describe('HerdEngine values and keys', () => {
  it('spreads the expiry of 10,000 entries written together over the jitter range', async () => {
    const clock = new ManualClock();
    const store = new MemoryStore({ maxEntries: 20_000 });
    const engine = new HerdEngine({
      store,
      now: clock.now,
      policy: { soft: '10s', hard: '100s', jitter: 0.2 },
    });
    const writtenAt = clock.now();
    await Promise.all(Array.from({ length: 10_000 }, (_, i) => engine.set(`k${i}`, i)));
    const entries = Array.from({ length: 10_000 }, (_, i) => store.get(`k${i}`).entry as Entry);
    const softOffsets = entries.map((entry) => entry.softExpireAt - writtenAt);
    const hardOffsets = entries.map((entry) => entry.hardExpireAt - writtenAt);
    expect(Math.min(...softOffsets)).toBeGreaterThanOrEqual(10_000);
    expect(Math.max(...softOffsets)).toBeLessThanOrEqual(12_000);
    expect(Math.min(...hardOffsets)).toBeGreaterThanOrEqual(100_000);
    expect(Math.max(...hardOffsets)).toBeLessThanOrEqual(120_000);
    const buckets = Array<number>(10).fill(0);
    for (const offset of softOffsets)
      buckets[Math.min(9, Math.floor((offset - 10_000) / 200))]! += 1;
    // Uniform over the range: every tenth of it holds roughly a tenth of the keys.
    expect(buckets.every((count) => count > 800 && count < 1_200)).toBe(true);
    expect(entries.every((entry) => entry.softExpireAt <= entry.hardExpireAt)).toBe(true);
  });

  it('caches falsy values as values, not as misses', async () => {
    const engine = memoryEngine();
    for (const [key, value] of [
      ['zero', 0],
      ['false', false],
      ['empty', ''],
      ['list', []],
    ] as const) {
      const loader = counted(() => value);
      await engine.getOrLoad(key, loader);
      await expect(engine.read(key, loader)).resolves.toMatchObject({
        value,
        path: 'fresh',
        negative: false,
      });
      expect(loader.calls).toBe(1);
    }
  });

  it('treats a corrupt entry as a counted miss and reloads it', async () => {
    class CorruptOnce extends MemoryStore {
      corrupt = true;
      override get(key: string): StoreSnapshot {
        if (this.corrupt) {
          this.corrupt = false;
          return { entry: CORRUPT_ENTRY, version: 0 };
        }
        return super.get(key);
      }
    }
    const engine = new HerdEngine({ store: new CorruptOnce() });
    const events: HerdEvent[] = [];
    engine.onEvent((event) => events.push(event));
    await expect(engine.read('k', () => 'reloaded')).resolves.toMatchObject({
      value: 'reloaded',
      path: 'miss',
    });
    expect(engine.stats().corruptEntries).toBe(1);
    expect(events.some((event) => event.type === 'corrupt-entry' && event.key === 'k')).toBe(true);
  });

  it('rejects a key that is not a non-empty string', async () => {
    const engine = memoryEngine();
    await expect(engine.getOrLoad('', () => 1)).rejects.toMatchObject({
      code: 'HERD_GUARD_INVALID_KEY',
    });
    await expect(engine.getOrLoad(42 as unknown as string, () => 1)).rejects.toMatchObject({
      code: 'HERD_GUARD_INVALID_KEY',
    });
    await expect(engine.getOrLoad('k', 'nope' as unknown as () => number)).rejects.toMatchObject({
      code: 'HERD_GUARD_CONFIG',
      field: 'loader',
    });
  });
});
