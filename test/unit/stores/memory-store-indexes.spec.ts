import { describe, expect, it } from '@jest/globals';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { HerdEngine, MemoryStore } from '../../../lib/index.js';
import { ManualClock } from '../../helpers/clock.js';

// The store keeps its indexes in private fields: what they hold is measured as retained heap.
setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;

function retainedHeapBytes(since: number): number {
  collectGarbage();
  collectGarbage();
  return process.memoryUsage().heapUsed - since;
}

describe('MemoryStore indexes', () => {
  it('keeps nothing of the input links of values that expired long ago when nobody reads them (bounded like its entries)', async () => {
    const clock = new ManualClock();
    const store = new MemoryStore({ maxEntries: 10, now: clock.now });
    const engine = new HerdEngine({ store, now: clock.now, policy: { soft: '1s', hard: '2s' } });
    collectGarbage();
    collectGarbage();
    const baseline = process.memoryUsage().heapUsed;
    // A route per product, each over its product's cached value: one input link per product.
    for (let id = 0; id < 15_000; id += 1) {
      await engine.getOrLoad(`route:/products/${id}`, async () => ({
        product: await engine.getOrLoad(`product:${id}`, () => ({ id })),
      }));
    }
    // A day later every value and every link is past its lifetime; the store still works.
    clock.advance(86_400_000);
    for (let id = 0; id < 10; id += 1) await engine.getOrLoad(`other:${id}`, () => id);
    expect(store.size).toBeLessThanOrEqual(10);
    // The same reads without a loader reading another key retain well under 1 MB.
    expect(retainedHeapBytes(baseline)).toBeLessThan(2_500_000);
    await engine.close();
  });
});
