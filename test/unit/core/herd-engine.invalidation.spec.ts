import { describe, expect, it } from '@jest/globals';
import { HerdEngine, type HerdStore, MemoryStore } from '../../../lib/index.js';
import { counted } from '../../helpers/counted.js';
import { deferred, flush, until } from '../../helpers/deferred.js';
import { memoryEngine, staleWithRefreshInFlight } from '../../helpers/engine.js';

describe('HerdEngine writes and invalidations', () => {
  it('expire() makes the next read stale with one background refresh instead of a miss', async () => {
    const engine = memoryEngine({ policy: { soft: '1h' } });
    await engine.getOrLoad('k', () => 'v1');
    await engine.expire('k');
    const gate = deferred<string>();
    const loader = counted(() => gate.promise);
    const reads = await Promise.all(Array.from({ length: 50 }, () => engine.read('k', loader)));
    expect(reads.every((read) => read.path === 'stale' && read.value === 'v1')).toBe(true);
    await until(() => loader.calls > 0);
    await flush();
    expect(loader.calls).toBe(1);
    gate.resolve('v2');
    await reads[0]!.revalidated;
    await expect(engine.getOrLoad('k', loader)).resolves.toBe('v2');
  });

  it('expireTag() marks every tagged key stale, and deleteTag() removes them', async () => {
    const engine = memoryEngine({ policy: { soft: '1h' } });
    await engine.getOrLoad('p:1', () => 'a', { tags: ['products'] });
    await engine.getOrLoad('p:2', () => 'b', { tags: ['products'] });
    await engine.getOrLoad('u:1', () => 'c', { tags: ['users'] });
    await expect(engine.expireTag('products')).resolves.toBe(2);
    await expect(engine.peek('p:1')).resolves.toMatchObject({ path: 'stale' });
    await expect(engine.peek('u:1')).resolves.toMatchObject({ path: 'fresh' });
    await expect(engine.deleteTag('products')).resolves.toBe(2);
    await expect(engine.peek('p:2')).resolves.toBeUndefined();
  });

  it('does not let a load that started before set() overwrite the value set', async () => {
    const { engine, clock, gate, stale } = await staleWithRefreshInFlight({
      soft: '1s',
      hard: '1h',
      jitter: 0,
    });
    clock.advance(10);
    await engine.set('k', 'written after the update');
    gate.resolve('row read before the update');
    await stale.revalidated;
    await expect(engine.read('k', () => 'unused')).resolves.toMatchObject({
      value: 'written after the update',
      path: 'fresh',
    });
  });

  it('does not let a load that started before expire() store its value as fresh', async () => {
    const { engine, clock, gate, stale } = await staleWithRefreshInFlight({
      soft: '1s',
      hard: '1h',
      jitter: 0,
    });
    clock.advance(10);
    await engine.expire('k'); // the database changed while the refresh was reading it
    gate.resolve('row read before the update');
    await stale.revalidated;
    const after = await engine.read('k', () => 'row read after the update');
    expect(after.path).toBe('stale');
    await expect(after.revalidated).resolves.toMatchObject({ value: 'row read after the update' });
  });
});

describe('HerdEngine: a read after a write or invalidation landed, while the store cannot be read', () => {
  /** A memory store whose reads fail while `down` is set (a stalled or cut connection). */
  function flakyReads(): { store: HerdStore; down: { on: boolean } } {
    const down = { on: false };
    const inner = new MemoryStore();
    const store = new Proxy(inner, {
      get(target, property, receiver) {
        if (property === 'get') {
          return (key: string) =>
            down.on ? Promise.reject(new Error('connection stalled')) : target.get(key);
        }
        const value: unknown = Reflect.get(target, property, receiver);
        return typeof value === 'function'
          ? (value as (...args: unknown[]) => unknown).bind(target)
          : value;
      },
    });
    return { store, down };
  }

  it.each([
    ['delete', (engine: HerdEngine) => engine.delete('k')],
    ['expire', (engine: HerdEngine) => engine.expire('k')],
    ['set', (engine: HerdEngine) => engine.set('k', 'written')],
    ['deleteTag', (engine: HerdEngine) => engine.deleteTag('t')],
    ['clear', (engine: HerdEngine) => engine.clear()],
  ])('is not answered by a load that began before %s()', async (_name, invalidate) => {
    const { store, down } = flakyReads();
    const engine = new HerdEngine({ store });
    const gate = deferred<string>();
    const before = engine.getOrLoad('k', () => gate.promise, { tags: ['t'] });
    await until(() => engine.activity().loaders === 1);
    await invalidate(engine);
    down.on = true;
    const after = engine.getOrLoad('k', () => 'loaded after', { tags: ['t'] });
    gate.resolve('loaded before');
    await expect(before).resolves.toBe('loaded before');
    await expect(after).resolves.not.toBe('loaded before');
    await engine.close();
  });
});
