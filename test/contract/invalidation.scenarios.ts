import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import type { CachePolicy, HerdEngine, LoadContext } from '../../lib/index.js';
import { deferred, until } from '../helpers/deferred.js';

/** Several engines ("pods") over one shared backing store, each with its own clock. */
export interface EngineCluster {
  readonly engines: readonly HerdEngine[];
  close(): Promise<void>;
}

export interface ClusterSpec {
  readonly count: number;
  readonly policy?: CachePolicy;
  /** Offset of each engine's clock from the real one, in ms (a pod whose clock is ahead or behind). */
  readonly clockOffsetsMs?: readonly number[];
}

/** A backend row the loaders read: its value at the moment a load starts is what that load returns. */
function row(initial: string) {
  const state = { value: initial, loads: 0 };
  /** Reads the row at once and returns it when `gate` (if any) opens: a slow query. */
  const loader =
    (gate?: Promise<void>) =>
    async (_context: LoadContext<string>): Promise<string> => {
      state.loads += 1;
      const seen = state.value;
      if (gate !== undefined) await gate;
      return seen;
    };
  return { state, loader };
}

async function settled(engines: readonly HerdEngine[]): Promise<void> {
  await until(
    () =>
      engines.every(
        (engine) => engine.activity().inflight === 0 && engine.activity().pendingStoreOps === 0,
      ),
    5_000,
    'every engine to be idle',
  );
}

/**
 * What an invalidation guarantees, run against each store: order comes from the store (never a pod's
 * clock), an invalidation fences the loads already running, and derived values follow their inputs.
 */
export function describeInvalidation(
  name: string,
  start: (spec: ClusterSpec) => Promise<EngineCluster>,
): void {
  describe(`${name}: invalidation always wins`, () => {
    let cluster: EngineCluster | undefined;
    const launch = async (spec: ClusterSpec): Promise<readonly HerdEngine[]> => {
      cluster = await start(spec);
      return cluster.engines;
    };

    beforeEach(() => {
      cluster = undefined;
    });

    afterEach(async () => {
      await cluster?.close();
    });

    describe.each([
      ['on one pod', 1],
      ['across two pods', 2],
    ])('%s', (_label, pods) => {
      const pick = (engines: readonly HerdEngine[]) => ({
        loading: engines[0]!,
        writer: engines[pods - 1]!,
      });
      /**
       * `loading` loads k from a row that says 'old'; the load is held at `gate` once it has read the
       * row, and the row now says 'new' (the update an invalidation will follow).
       */
      const loadHeldAcrossUpdate = async () => {
        const { loading, writer } = pick(await launch({ count: pods, policy: { soft: '1h' } }));
        const { state, loader } = row('old');
        const gate = deferred();
        const before = loading.getOrLoad('k', loader(gate.promise));
        await until(() => state.loads === 1);
        state.value = 'new';
        return { loading, writer, state, loader, gate, before };
      };

      it('never hands a read that starts after delete() resolved the value of a load that started before it', async () => {
        const { loading, writer, loader, gate, before } = await loadHeldAcrossUpdate();
        await writer.delete('k');
        const after = loading.getOrLoad('k', loader());
        gate.resolve();
        await expect(before).resolves.toBe('old');
        await expect(after).resolves.toBe('new');
        await settled(cluster!.engines);
        await expect(loading.read('k', loader())).resolves.toMatchObject({
          value: 'new',
          path: 'fresh',
        });
        await expect(writer.read('k', loader())).resolves.toMatchObject({
          value: 'new',
          path: 'fresh',
        });
      });

      it('never stores as fresh what a background refresh read before delete()', async () => {
        const { loading, writer } = pick(await launch({ count: pods, policy: { soft: '1h' } }));
        const { state, loader } = row('v1');
        await loading.getOrLoad('k', loader());
        await loading.expire('k');
        const gate = deferred();
        const stale = await loading.read('k', loader(gate.promise));
        expect(stale).toMatchObject({ value: 'v1', path: 'stale' });
        await until(() => state.loads === 2); // the refresh is reading the row
        state.value = 'v2';
        await writer.delete('k');
        const after = loading.read('k', loader());
        gate.resolve();
        await expect(after).resolves.toMatchObject({ value: 'v2' });
        await settled(cluster!.engines);
        await expect(loading.read('k', loader())).resolves.toMatchObject({
          value: 'v2',
          path: 'fresh',
        });
        await expect(writer.read('k', loader())).resolves.toMatchObject({
          value: 'v2',
          path: 'fresh',
        });
      });

      it('starts a new load on refresh() even while an older load of the key is running', async () => {
        const { loading, writer, loader, gate, before } = await loadHeldAcrossUpdate();
        const refreshed = writer.refresh('k', loader());
        await expect(refreshed).resolves.toMatchObject({ value: 'new' });
        gate.resolve();
        await expect(before).resolves.toBe('old');
        await settled(cluster!.engines);
        await expect(loading.read('k', loader())).resolves.toMatchObject({
          value: 'new',
          path: 'fresh',
        });
      });

      it('fences a running load with expire() on a key that is not cached yet', async () => {
        const { writer, loader, gate, before } = await loadHeldAcrossUpdate();
        await expect(writer.expire('k')).resolves.toBe(false);
        gate.resolve();
        await expect(before).resolves.toBe('old');
        await settled(cluster!.engines);
        for (const engine of cluster!.engines) {
          const read = await engine.read('k', loader());
          expect(read.path === 'fresh' && read.value === 'old').toBe(false);
        }
        await settled(cluster!.engines);
        await expect(writer.read('k', loader())).resolves.toMatchObject({
          value: 'new',
          path: 'fresh',
        });
      });

      it('does not let a load that started before set() overwrite the value set', async () => {
        const { loading, writer, state, loader, gate, before } = await loadHeldAcrossUpdate();
        await writer.set('k', 'new');
        gate.resolve();
        await before;
        await settled(cluster!.engines);
        await expect(loading.read('k', loader())).resolves.toMatchObject({
          value: 'new',
          path: 'fresh',
        });
        expect(state.loads).toBe(1);
      });

      it('makes a value derived from another key follow that key: stale once after expire(), then the new value', async () => {
        const { loading, writer } = pick(await launch({ count: pods, policy: { soft: '1h' } }));
        const { state, loader } = row('alpha');
        const route = (engine: HerdEngine) => () =>
          engine.read('route:/products/9', async () => ({
            name: await engine.getOrLoad('product:9', loader()),
          }));
        await expect(route(loading)()).resolves.toMatchObject({
          value: { name: 'alpha' },
          path: 'miss',
        });
        await expect(route(writer)()).resolves.toMatchObject({
          value: { name: 'alpha' },
          path: 'fresh',
        });
        state.value = 'beta';
        await writer.expire('product:9');
        const first = await route(loading)();
        expect(first.value).toEqual({ name: 'alpha' });
        expect(first.path).toBe('stale');
        await settled(cluster!.engines);
        await expect(route(loading)()).resolves.toMatchObject({
          value: { name: 'beta' },
          path: 'fresh',
        });
        await expect(route(writer)()).resolves.toMatchObject({
          value: { name: 'beta' },
          path: 'fresh',
        });
      });

      it('invalidates values derived from a tagged key with expireTag() on that tag', async () => {
        const { loading, writer } = pick(await launch({ count: pods, policy: { soft: '1h' } }));
        const { state, loader } = row('alpha');
        const page = (engine: HerdEngine) =>
          engine.read(
            'page:home',
            async () =>
              `<h1>${await engine.getOrLoad('product:9', loader(), { tags: ['products'] })}</h1>`,
          );
        await page(loading);
        state.value = 'beta';
        await expect(writer.expireTag('products')).resolves.toBe(1);
        await expect(page(loading)).resolves.toMatchObject({
          value: '<h1>alpha</h1>',
          path: 'stale',
        });
        await settled(cluster!.engines);
        await expect(page(writer)).resolves.toMatchObject({
          value: '<h1>beta</h1>',
          path: 'fresh',
        });
      });

      it.each([
        ['refresh()', (engine: HerdEngine) => engine.refresh.bind(engine)],
        ['warm()', (engine: HerdEngine) => engine.warm.bind(engine)],
      ])(
        'makes a value derived from a key stale once %s of the key resolves with a new value',
        async (_label, reload) => {
          const { loading, writer } = pick(await launch({ count: pods, policy: { soft: '1h' } }));
          const { state, loader } = row('100');
          const page = (engine: HerdEngine) =>
            engine.read('page', async () => `price=${await engine.getOrLoad('price', loader())}`);
          await expect(page(loading)).resolves.toMatchObject({ value: 'price=100', path: 'miss' });
          state.value = '200';
          await expect(reload(writer)('price', loader())).resolves.toMatchObject({
            value: '200',
            path: 'miss',
          });
          for (const engine of cluster!.engines) {
            await expect(page(engine)).resolves.not.toMatchObject({
              value: 'price=100',
              path: 'fresh',
            });
          }
          await settled(cluster!.engines);
          await expect(page(loading)).resolves.toMatchObject({ value: 'price=200', path: 'fresh' });
        },
      );

      describe('clear()', () => {
        /** `loading` has loaded keys a and b from rows that now say 'new'. */
        const loadedThenUpdated = async () => {
          const { loading, writer } = pick(await launch({ count: pods, policy: { soft: '1h' } }));
          const rows = { a: row('old'), b: row('old') };
          for (const [key, { loader }] of Object.entries(rows))
            await expect(loading.getOrLoad(key, loader())).resolves.toBe('old');
          for (const { state } of Object.values(rows)) state.value = 'new';
          return { loading, writer, rows };
        };

        it("serves every key stale once after clear('expire'), then reloads each once", async () => {
          const { loading, writer, rows } = await loadedThenUpdated();
          await writer.clear('expire');
          for (const [key, { loader }] of Object.entries(rows)) {
            await expect(loading.read(key, loader())).resolves.toMatchObject({
              value: 'old',
              path: 'stale',
            });
          }
          await settled(cluster!.engines);
          for (const engine of cluster!.engines) {
            for (const [key, { loader }] of Object.entries(rows)) {
              await expect(engine.read(key, loader())).resolves.toMatchObject({
                value: 'new',
                path: 'fresh',
              });
            }
          }
          for (const { state } of Object.values(rows)) expect(state.loads).toBe(2);
        });

        it('expires by default', async () => {
          const { loading, writer, rows } = await loadedThenUpdated();
          await writer.clear();
          await expect(loading.read('a', rows.a.loader())).resolves.toMatchObject({
            value: 'old',
            path: 'stale',
          });
        });

        it("makes every key a miss after clear('delete')", async () => {
          const { loading, writer, rows } = await loadedThenUpdated();
          await writer.clear('delete');
          for (const engine of [loading, writer])
            for (const key of Object.keys(rows))
              await expect(engine.peek(key)).resolves.toBeUndefined();
          for (const [key, { loader }] of Object.entries(rows)) {
            await expect(writer.read(key, loader())).resolves.toMatchObject({
              value: 'new',
              path: 'miss',
            });
          }
          await expect(loading.read('a', rows.a.loader())).resolves.toMatchObject({
            value: 'new',
            path: 'fresh',
          });
          expect(rows.a.state.loads).toBe(2);
        });

        it.each(['expire', 'delete'] as const)(
          "fences a load running across clear('%s'): its value is never stored as fresh",
          async (mode) => {
            const { loading, writer, loader, gate, before } = await loadHeldAcrossUpdate();
            await writer.clear(mode);
            const after = loading.getOrLoad('k', loader());
            gate.resolve();
            await expect(before).resolves.toBe('old');
            await expect(after).resolves.toBe('new');
            await settled(cluster!.engines);
            for (const engine of cluster!.engines) {
              await expect(engine.read('k', loader())).resolves.toMatchObject({
                value: 'new',
                path: 'fresh',
              });
            }
          },
        );

        it('leaves what is written after clear() resolved as it is', async () => {
          const { loading, writer, rows } = await loadedThenUpdated();
          await writer.clear('delete');
          await writer.set('a', 'written');
          await loading.set('b', 'written too');
          for (const engine of cluster!.engines) {
            await expect(engine.read('a', rows.a.loader())).resolves.toMatchObject({
              value: 'written',
              path: 'fresh',
            });
            await expect(engine.read('b', rows.b.loader())).resolves.toMatchObject({
              value: 'written too',
              path: 'fresh',
            });
          }
          expect(rows.a.state.loads).toBe(1);
        });

        it('applies the later of two clears: delete after expire, expire after delete', async () => {
          const { loading, writer, rows } = await loadedThenUpdated();
          await writer.clear('expire');
          await writer.clear('delete');
          await expect(loading.peek('a')).resolves.toBeUndefined();
          await expect(loading.read('a', rows.a.loader())).resolves.toMatchObject({
            value: 'new',
            path: 'miss',
          });
          await writer.clear('delete');
          await loading.set('a', 'between');
          await writer.clear('expire');
          await expect(loading.read('a', rows.a.loader())).resolves.toMatchObject({
            value: 'between',
            path: 'stale',
          });
          await expect(loading.read('b', rows.b.loader())).resolves.toMatchObject({
            value: 'new',
            path: 'miss',
          });
        });

        it('keeps a derived value consistent with its inputs: stale once, then rebuilt', async () => {
          const { loading, writer } = pick(await launch({ count: pods, policy: { soft: '1h' } }));
          const { state, loader } = row('alpha');
          const route = (engine: HerdEngine) =>
            engine.read('route:/products/9', async () => ({
              name: await engine.getOrLoad('product:9', loader()),
            }));
          await route(loading);
          state.value = 'beta';
          await writer.clear('expire');
          await expect(route(loading)).resolves.toMatchObject({
            value: { name: 'alpha' },
            path: 'stale',
          });
          await settled(cluster!.engines);
          for (const engine of cluster!.engines) {
            await expect(route(engine)).resolves.toMatchObject({
              value: { name: 'beta' },
              path: 'fresh',
            });
          }
        });
      });

      it('bounds a derived value by the expiry of what it read', async () => {
        const { loading } = pick(await launch({ count: pods, policy: { soft: '1h' } }));
        const input = await loading.read('input', () => 'x', {
          policy: { soft: '1m', hard: '2m', jitter: 0 },
        });
        const derived = await loading.read(
          'derived',
          async () => `${await loading.getOrLoad('input', () => 'y')}!`,
          {
            policy: { soft: '1h', hard: '10h' },
          },
        );
        expect(derived.value).toBe('x!');
        expect(derived.softExpireAt).toBeLessThanOrEqual(input.softExpireAt);
        expect(derived.hardExpireAt).toBeLessThanOrEqual(input.hardExpireAt);
      });
    });

    describe('with pod clocks 5 s apart', () => {
      it('orders writes by when they reached the store, whichever pod is ahead', async () => {
        const [ahead, behind] = await launch({
          count: 2,
          policy: { soft: '1h' },
          clockOffsetsMs: [5_000, 0],
        });
        await ahead!.set('k', 'first');
        await behind!.set('k', 'second');
        for (const engine of [ahead!, behind!]) {
          await expect(engine.read('k', () => 'loaded')).resolves.toMatchObject({
            value: 'second',
            path: 'fresh',
          });
        }
        await behind!.set('k', 'third');
        await ahead!.set('k', 'fourth');
        for (const engine of [ahead!, behind!]) {
          await expect(engine.read('k', () => 'loaded')).resolves.toMatchObject({
            value: 'fourth',
            path: 'fresh',
          });
        }
      });

      it('reloads a key exactly once after expire(), whichever pod loaded it and whichever expires it', async () => {
        const engines = await launch({
          count: 2,
          policy: { soft: '1h' },
          clockOffsetsMs: [5_000, -5_000],
        });
        for (const [loaderPod, expiringPod] of [
          [0, 1],
          [1, 0],
        ] as const) {
          const key = `k${loaderPod}`;
          const { state, loader } = row('v1');
          await engines[loaderPod]!.getOrLoad(key, loader());
          state.value = 'v2';
          await engines[expiringPod]!.expire(key);
          // The pod that expired the key reads it first, then every pod.
          for (const readers of [[engines[expiringPod]!], engines]) {
            for (let round = 0; round < 10; round += 1) {
              for (const engine of readers) await engine.read(key, loader());
              await settled(engines);
            }
          }
          expect(state.loads).toBe(2);
          for (const engine of engines) {
            await expect(engine.read(key, loader())).resolves.toMatchObject({
              value: 'v2',
              path: 'fresh',
            });
          }
        }
      });
    });
  });
}
