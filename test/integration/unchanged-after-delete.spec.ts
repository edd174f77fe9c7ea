import { describe, expect, it } from '@jest/globals';
import { HerdEngine, type LoadContext, MemoryStore } from '../../lib/index.js';
import { deferred, sleep, until } from '../helpers/deferred.js';
import type { Pod } from '../helpers/pods.js';
import { redisPodsPerTest } from '../helpers/redis-pods.js';

// unchanged() keeps the stale value the load began with: never one deleted or cleared meanwhile.

const redis = redisPodsPerTest('unchanged');

describe.each([
  ['delete()', (pod: Pod) => pod.engine.delete('k')],
  ["clear('delete')", (pod: Pod) => pod.engine.clear('delete')],
])('unchanged() after %s on another pod', (_name, remove) => {
  it.each([
    ['while the refresh loads', 'loading'],
    ['just as the refresh starts', 'starting'],
  ])('does not bring the deleted value back, %s', async (_when, timing) => {
    const pods = await redis.start(2, { soft: '100ms', hard: '1h', jitter: 0 });
    const [a, b] = pods as [Pod, Pod];
    await a.engine.getOrLoad('k', () => 'v1');
    await sleep(150);
    const gate = deferred();
    let calls = 0;
    const keep = async (context: LoadContext<string>): Promise<string> => {
      calls += 1;
      await gate.promise;
      // A conditional request: the backend's copy is still the one the stale value was read from.
      return context.stale === undefined ? 'v2' : context.unchanged();
    };
    // A stale read: answered v1, one refresh in the background that will answer unchanged().
    const stale = await a.engine.read('k', keep);
    expect(stale).toMatchObject({ path: 'stale', value: 'v1' });
    if (timing === 'loading') await until(() => calls === 1, 5_000, 'the refresh to load');
    await remove(b);
    gate.resolve();
    await stale.revalidated?.catch(() => undefined);
    await sleep(50);
    for (const pod of pods) {
      const read = await pod.engine.read('k', () => 'v2');
      expect(read.value).toBe('v2');
    }
  });
});

describe.each([
  ['delete()', (engine: HerdEngine) => engine.delete('k')],
  ["clear('delete')", (engine: HerdEngine) => engine.clear('delete')],
])('unchanged() after %s on another engine of one memory store', (_name, remove) => {
  it.each([['while the refresh loads'], ['just as the refresh starts']])(
    'does not bring the deleted value back, %s',
    async (when) => {
      const store = new MemoryStore();
      const policy = { soft: '100ms', hard: '1h', jitter: 0 } as const;
      const engines = [new HerdEngine({ store, policy }), new HerdEngine({ store, policy })];
      const [a, b] = engines as [HerdEngine, HerdEngine];
      try {
        await a.getOrLoad('k', () => 'v1');
        await sleep(150);
        const gate = deferred();
        let calls = 0;
        const keep = async (context: LoadContext<string>): Promise<string> => {
          calls += 1;
          await gate.promise;
          return context.stale === undefined ? 'v2' : context.unchanged();
        };
        const stale = await a.read('k', keep);
        if (when === 'while the refresh loads') await until(() => calls === 1);
        await remove(b);
        gate.resolve();
        await stale.revalidated?.catch(() => undefined);
        for (const engine of engines)
          await expect(engine.getOrLoad('k', () => 'v2')).resolves.toBe('v2');
      } finally {
        await Promise.all(engines.map((engine) => engine.close()));
      }
    },
  );
});
