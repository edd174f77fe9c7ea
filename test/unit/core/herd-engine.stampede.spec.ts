import { describe, expect, it } from '@jest/globals';
import { HerdEngine, type HerdEvent, LoaderFailedError, MemoryStore } from '../../../lib/index.js';
import { asyncReads } from '../../helpers/async-store.js';
import { counted } from '../../helpers/counted.js';
import { deferred, sleep } from '../../helpers/deferred.js';
import { engineWithClock, memoryEngine } from '../../helpers/engine.js';

describe('HerdEngine under a stampede', () => {
  it('calls the loader once for 1,000 concurrent callers on a cold key and gives all of them the value', async () => {
    const engine = memoryEngine();
    const gate = deferred<string>();
    const loader = counted(() => gate.promise);
    const reads = Array.from({ length: 1_000 }, () => engine.getOrLoad('cold', loader));
    gate.resolve('value');
    const values = await Promise.all(reads);
    expect(loader.calls).toBe(1);
    expect(values.every((value) => value === 'value')).toBe(true);
    expect(engine.stats().coalesced).toBe(999);
  });

  it('reports callers that join a load together (sharing one read) as one coalesced event that counts them all', async () => {
    const engine = new HerdEngine({ store: asyncReads(new MemoryStore()) });
    const events: HerdEvent[] = [];
    engine.onEvent((event) => {
      if (event.type === 'coalesced') events.push(event);
    });
    const gate = deferred<string>();
    const loader = counted(() => gate.promise);
    const reads = Array.from({ length: 1_000 }, () => engine.getOrLoad('cold', loader));
    gate.resolve('value');
    await Promise.all(reads);
    expect(loader.calls).toBe(1);
    expect(events).toEqual([{ type: 'coalesced', key: 'cold', callers: 999 }]);
    expect(engine.stats().coalesced).toBe(999);
  });

  it('gives all 1,000 callers the typed error when the loader throws, and runs the loader again after the backoff', async () => {
    const engine = memoryEngine({ policy: { backoff: { initial: '40ms', max: '40ms' } } });
    const gate = deferred<string>();
    const loader = counted(() => gate.promise);
    const reads = Array.from({ length: 1_000 }, () =>
      engine.getOrLoad('k', loader).catch((error: unknown) => error),
    );
    const cause = new Error('db down');
    gate.reject(cause);
    const errors = await Promise.all(reads);
    expect(
      errors.every(
        (error) => error instanceof LoaderFailedError && error.cause === cause && error.key === 'k',
      ),
    ).toBe(true);
    expect(loader.calls).toBe(1);
    await sleep(50);
    await expect(engine.getOrLoad('k', () => 'recovered')).resolves.toBe('recovered');
  });

  it('calls the loader once for 1,000 calls on a missing id within the negative TTL', async () => {
    const { engine, clock } = engineWithClock({ negativeTtl: '5s' });
    const loader = counted(() => null);
    const concurrent = await Promise.all(
      Array.from({ length: 500 }, () => engine.getOrLoad('missing', loader)),
    );
    for (let i = 0; i < 500; i += 1) await engine.getOrLoad('missing', loader);
    expect(concurrent.every((value) => value === null)).toBe(true);
    expect(loader.calls).toBe(1);
    expect(engine.stats().reads.negative).toBe(500);
    clock.advance(5_000);
    await engine.getOrLoad('missing', loader);
    expect(loader.calls).toBe(2);
  });

  it('lets concurrent callers with the same options share one store read, and still counts each of them', async () => {
    const store = asyncReads(new MemoryStore());
    const engine = new HerdEngine({ store });
    const events: HerdEvent[] = [];
    engine.onEvent((event) => events.push(event));
    await engine.getOrLoad('k', () => 'v');
    store.reads = 0;
    const values = await Promise.all(
      Array.from({ length: 100 }, () => engine.getOrLoad('k', () => 'unused')),
    );
    expect(values).toEqual(Array(100).fill('v'));
    expect(store.reads).toBe(1);
    expect(engine.stats().reads.fresh).toBe(100);
    expect(events.filter((event) => event.type === 'read' && event.path === 'fresh')).toHaveLength(
      100,
    );
    // Options written inline share by value; other values (or read(), which answers per caller) do not.
    store.reads = 0;
    await Promise.all([
      engine.getOrLoad('k', () => 'x', { tags: ['a'], policy: { soft: '1m' } }),
      engine.getOrLoad('k', () => 'x', { tags: ['a'], policy: { soft: '1m' } }),
      engine.getOrLoad('k', () => 'x', { tags: ['b'], policy: { soft: '1m' } }),
      engine.getOrLoad('k', () => 'x', { tags: ['a'], policy: { soft: '2m' } }),
      engine.read('k', () => 'x'),
    ]);
    expect(store.reads).toBe(4);
  });

  it('counts callers sharing a read that turns into a load as coalesced, with one loader call', async () => {
    const engine = new HerdEngine({ store: asyncReads(new MemoryStore()) });
    const loader = counted(() => 'loaded');
    await expect(
      Promise.all(Array.from({ length: 50 }, () => engine.getOrLoad('cold', loader))),
    ).resolves.toEqual(Array(50).fill('loaded'));
    expect(loader.calls).toBe(1);
    expect(engine.stats()).toMatchObject({ coalesced: 49, reads: { miss: 50 } });
  });
});
