import { describe, expect, it } from '@jest/globals';
import { HerdEngine, MemoryStore } from '../../../lib/index.js';
import { ManualClock } from '../../helpers/clock.js';
import { until } from '../../helpers/deferred.js';

/** A memory store that counts its reads (answered synchronously, as a near-cache hit is). */
class CountingStore extends MemoryStore {
  reads = 0;
  override get(key: string): ReturnType<MemoryStore['get']> {
    this.reads += 1;
    return super.get(key);
  }
}

const loader = async (): Promise<string> => 'v';

/**
 * Callers of a key in one tick share a synchronous answer (a hit from memory) as they share a store
 * read in flight: the store is asked once per tick, every caller is counted, and a caller in a later
 * tick (which may come after an invalidation resolved) reads anew.
 */
describe('same-tick callers of a key answered from memory', () => {
  it('share one store read and one answer, each caller counted', async () => {
    const store = new CountingStore();
    const engine = new HerdEngine({ store });
    await engine.getOrLoad('k', loader);
    store.reads = 0;
    const reads: string[] = [];
    engine.onEvent((event) => {
      if (event.type === 'read') reads.push(event.path);
    });
    const answers = Array.from({ length: 100 }, () =>
      engine.getOrLoad('k', loader, { policy: { soft: '30s' } }),
    );
    expect(store.reads).toBe(1);
    expect(await Promise.all(answers)).toEqual(Array(100).fill('v'));
    expect(engine.stats().reads.fresh).toBe(100);
    expect(reads).toHaveLength(100);
    // The next tick reads the store again.
    await engine.getOrLoad('k', loader, { policy: { soft: '30s' } });
    expect(store.reads).toBe(2);
    await engine.close();
  });

  it('share a stale answer too, with one background refresh', async () => {
    const clock = new ManualClock();
    const store = new CountingStore({ now: clock.now });
    const engine = new HerdEngine({ store, now: clock.now, policy: { soft: '1s', hard: '1m' } });
    await engine.getOrLoad('k', async () => 'v1');
    clock.advance(2_000);
    store.reads = 0;
    let loads = 0;
    const reload = async (): Promise<string> => {
      loads += 1;
      return 'v2';
    };
    const answers = Array.from({ length: 50 }, () => engine.getOrLoad('k', reload));
    expect(store.reads).toBe(1);
    expect(await Promise.all(answers)).toEqual(Array(50).fill('v1'));
    expect(engine.stats().reads.stale).toBe(50);
    await until(() => engine.activity().inflight === 0 && loads > 0);
    expect(loads).toBe(1);
    await engine.close();
  });

  it('do not share across keys, policies, or with a caller that has its own limits', async () => {
    const store = new CountingStore();
    const engine = new HerdEngine({ store });
    await engine.getOrLoad('a', loader);
    await engine.getOrLoad('b', loader);
    store.reads = 0;
    void engine.getOrLoad('a', loader);
    void engine.getOrLoad('b', loader);
    void engine.getOrLoad('a', loader, { policy: { soft: '5s' } });
    void engine.getOrLoad('a', loader, { timeout: '1s' });
    void engine.read('a', loader);
    expect(store.reads).toBe(5);
    await engine.close();
  });

  it('read anew after an invalidation made in between resolved', async () => {
    const store = new CountingStore();
    const engine = new HerdEngine({ store });
    await engine.getOrLoad('k', loader);
    const paths: string[] = [];
    engine.onEvent((event) => {
      if (event.type === 'read') paths.push(event.path);
    });
    const first = engine.getOrLoad('k', loader);
    await engine.expire('k');
    await engine.getOrLoad('k', loader);
    await first;
    expect(paths).toEqual(['fresh', 'stale']);
    await engine.close();
  });
});
