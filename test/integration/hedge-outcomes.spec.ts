import { afterEach, describe, expect, it } from '@jest/globals';
import { type CachePolicy, HerdEngine, type LoadContext, MemoryStore } from '../../lib/index.js';
import { deferred, sleep, until } from '../helpers/deferred.js';
import type { Pod } from '../helpers/pods.js';
import { redisPodsPerTest } from '../helpers/redis-pods.js';

// A takeover of a holder deemed stuck (a hedge) and the holder it replaced: the first answer
// releases every waiter, whichever of the two it comes from; the other goes on, and a value it
// loads still replaces a failure.

const redis = redisPodsPerTest('hedge');
const cluster = (count: number, policy: CachePolicy): Promise<Pod[]> => redis.start(count, policy);

function settled<T>(call: Promise<T>, startedAt: number) {
  return call.then(
    (value) => ({ ok: true, value: value as unknown, atMs: performance.now() - startedAt }),
    (error: unknown) => ({ ok: false, value: error, atMs: performance.now() - startedAt }),
  );
}

const slowly =
  <T>(ms: number, answer: () => T) =>
  async (): Promise<T> => {
    await sleep(ms);
    return answer();
  };

const POLICY = { waitTimeout: '10s', backoff: { initial: '5s', max: '5s' } } as const;
const closing: HerdEngine[] = [];
afterEach(async () => {
  await Promise.all(closing.splice(0).map((engine) => engine.close()));
});

const STORES: ReadonlyArray<[string, () => Promise<HerdEngine[]>]> = [
  ['Redis', async () => (await cluster(3, POLICY)).map((pod) => pod.engine)],
  [
    'one memory store',
    async () => {
      const store = new MemoryStore();
      const engines = [0, 1, 2].map(() => new HerdEngine({ store, policy: POLICY }));
      closing.push(...engines);
      return engines;
    },
  ],
];

describe.each(STORES)(
  'on %s: a hedge that fails before the holder it took over',
  (_store, start) => {
    it('answers every waiter with its failure at once; the holder goes on, and its value replaces the failure', async () => {
      const [a, b, c] = (await start()) as [HerdEngine, HerdEngine, HerdEngine];
      const startedAt = performance.now();
      const holder = settled(
        a.getOrLoad(
          'k',
          slowly(2_500, () => 'good'),
        ),
        startedAt,
      );
      await sleep(100);
      // b deems the cold key's holder stuck after 1 s and hedges; its own attempt fails at once.
      let hedges = 0;
      const hedger = settled(
        b.getOrLoad('k', async () => {
          hedges += 1;
          await sleep(100);
          throw new Error('hedge attempt failed');
        }),
        startedAt,
      );
      await until(() => hedges === 1, 5_000, 'the hedge to start');
      // c comes once the hedge runs: the hedge's lease is not taken over again.
      const waiter = settled(
        c.getOrLoad('k', async () => 'loaded by c'),
        startedAt,
      );
      // One answer releases every waiter at once, long before the holder's load ends...
      for (const answer of await Promise.all([hedger, waiter])) {
        expect(answer.ok).toBe(false);
        expect(String(answer.value)).toContain('hedge attempt failed');
        expect(answer.atMs).toBeLessThan(2_000);
      }
      // ...but the holder's own callers wait for their load, which goes on and is stored.
      await expect(holder).resolves.toMatchObject({ ok: true, value: 'good' });
      // The holder's value ends the failure's backoff: it answers the next reads.
      const loader = async (): Promise<string> => 'reloaded';
      for (const engine of [a, b, c])
        await expect(engine.getOrLoad('k', loader)).resolves.toBe('good');
    }, 30_000);
  },
);

describe.each(STORES)('on %s: a refresh() that fails while a load runs', (_store, start) => {
  it("leaves that load's callers its value, and stores it", async () => {
    const [a, b] = (await start()) as [HerdEngine, HerdEngine];
    const holder = a.getOrLoad(
      'k',
      slowly(1_500, () => 'loaded'),
    );
    await sleep(1_100);
    const failing = slowly(0, () => {
      throw new Error('refresh failed');
    });
    await expect(b.refresh('k', failing)).rejects.toThrow('refresh failed');
    await expect(holder).resolves.toBe('loaded');
  }, 30_000);
});

describe.each(STORES)(
  'on %s: a refresh() whose load a warm() takes over and fails',
  (_store, start) => {
    it('answers with its own value once stored, and what was derived from the key goes stale', async () => {
      const [a, b, c] = (await start()) as [HerdEngine, HerdEngine, HerdEngine];
      await a.set('src', 'v1');
      const derive = (engine: HerdEngine) => async () =>
        `derived(${await engine.getOrLoad('src', async () => 'read at a miss')})`;
      await expect(c.getOrLoad('dep', derive(c))).resolves.toBe('derived(v1)');
      const startedAt = performance.now();
      const refreshed = settled(
        a.refresh(
          'src',
          slowly(2_000, () => 'v2'),
        ),
        startedAt,
      );
      await sleep(100);
      const warmed = b
        .warm(
          'src',
          slowly(50, () => {
            throw new Error('warm failed');
          }),
        )
        .catch(() => undefined);
      const [refresh] = await Promise.all([refreshed, warmed]);
      await sleep(2_300 - (performance.now() - startedAt));
      const src = await c.read('src', async () => 'read at a miss');
      const dep = await c.read('dep', derive(c));
      // Whatever src holds now, the value derived from it agrees: never v2 beside a fresh derived(v1).
      if (src.value === 'v2') {
        expect(refresh).toMatchObject({ ok: true });
        expect(dep.path === 'fresh' && dep.value === 'derived(v1)').toBe(false);
      }
    }, 30_000);
  },
);

describe.each(STORES)(
  'on %s: the pod whose hedge failed, once the holder stored its value',
  (_store, start) => {
    it('refreshes that value when it goes stale: the value ended its backoff', async () => {
      const [a, b] = (await start()) as [HerdEngine, HerdEngine];
      const hung = deferred<string>();
      let holderLoads = 0;
      const policy: CachePolicy = {
        soft: '1500ms',
        hard: '1m',
        jitter: 0,
        backoff: { initial: '8s', max: '8s' },
      };
      const holder = a.getOrLoad(
        'k',
        () => {
          holderLoads += 1;
          return hung.promise;
        },
        { policy },
      );
      await until(() => holderLoads === 1, 5_000, 'the holder to load');
      const hedge = b.getOrLoad(
        'k',
        slowly(20, () => {
          throw new Error('hedge failed');
        }),
        { policy },
      );
      await expect(hedge).rejects.toThrow('hedge failed');
      hung.resolve('v1');
      await expect(holder).resolves.toBe('v1');
      await expect(b.read('k', async () => 'unused', { policy })).resolves.toMatchObject({
        value: 'v1',
      });
      // Once v1 is stale, a read on b refreshes it (b's own failure is older than v1).
      await sleep(1_600);
      let refreshes = 0;
      const stale = await b.read(
        'k',
        async () => {
          refreshes += 1;
          return 'v2';
        },
        { policy },
      );
      expect(stale).toMatchObject({ value: 'v1', path: 'stale' });
      await stale.revalidated;
      expect(refreshes).toBe(1);
    }, 30_000);
  },
);

describe.each(STORES)('on %s: a holder that fails while its hedge still loads', (_store, start) => {
  it('answers every waiter with its failure at once; the hedge goes on, and its value replaces the failure', async () => {
    const [a, b, c] = (await start()) as [HerdEngine, HerdEngine, HerdEngine];
    const startedAt = performance.now();
    let hedgeLoads = 0;
    const holder = settled(
      a.getOrLoad(
        'k',
        slowly(1_600, () => {
          throw new Error('the holder timed out');
        }),
      ),
      startedAt,
    );
    await sleep(100);
    const hedger = settled(
      b.getOrLoad('k', async () => {
        hedgeLoads += 1;
        await sleep(800);
        return 'hedged';
      }),
      startedAt,
    );
    await until(() => hedgeLoads === 1, 5_000, 'the hedge to start');
    const waiter = settled(
      c.getOrLoad('k', async () => 'loaded by c'),
      startedAt,
    );
    const answers = await Promise.all([holder, hedger, waiter]);
    for (const answer of answers) {
      expect(answer.ok).toBe(false);
      expect(String(answer.value)).toContain('the holder timed out');
      expect(answer.atMs).toBeLessThan(1_600 + 200);
    }
    await sleep(2_100 - (performance.now() - startedAt));
    expect(hedgeLoads).toBe(1);
    const loader = async (): Promise<string> => 'reloaded';
    for (const engine of [a, b, c])
      await expect(engine.getOrLoad('k', loader)).resolves.toBe('hedged');
  }, 30_000);
});

describe('two hung cold keys at once, with a budget of one hedge', () => {
  it('hedges one early and takes the other over once its holder outlasts waitTimeout', async () => {
    const [a, b, c] = (await cluster(3, { waitTimeout: '3s' })) as [Pod, Pod, Pod];
    const hung = deferred<string>();
    let hungLoads = 0;
    const owners = ['cold:1', 'cold:2'].map((key) =>
      a.engine.getOrLoad(key, () => {
        hungLoads += 1;
        return hung.promise;
      }),
    );
    for (const owner of owners) void owner.catch(() => undefined);
    await until(() => hungLoads === 2, 5_000, 'both owners to load');
    const startedAt = performance.now();
    const answers = await Promise.all(
      [b, c].flatMap(({ engine }) =>
        ['cold:1', 'cold:2'].map((key) =>
          settled(
            engine.getOrLoad(
              key,
              slowly(50, () => 'loaded'),
            ),
            startedAt,
          ),
        ),
      ),
    );
    hung.resolve('late');
    for (const answer of answers) {
      expect(answer).toMatchObject({ ok: true, value: 'loaded' });
      // Within waitTimeout plus a load and the re-check interval, not 2 x waitTimeout.
      expect(answer.atMs).toBeLessThan(3_000 + 800);
    }
    expect(Math.min(...answers.map((answer) => answer.atMs))).toBeLessThan(1_500);
  }, 30_000);
});

describe('a hung holder whose hedge ends with a value not to be cached', () => {
  it("answers the hung pod's own callers with it, as it does a value to cache", async () => {
    const [a, b] = (await cluster(2, { waitTimeout: '3s' })) as [Pod, Pod];
    const hung = deferred<string>();
    let hungLoads = 0;
    const startedAt = performance.now();
    const owner = settled(
      a.engine.getOrLoad('cold', () => {
        hungLoads += 1;
        return hung.promise;
      }),
      startedAt,
    );
    await until(() => hungLoads === 1, 5_000, 'the owner to load');
    await sleep(100);
    const other = await settled(
      b.engine.getOrLoad('cold', async (context: LoadContext<string>) => {
        await sleep(100);
        context.doNotCache();
        return 'not to cache';
      }),
      startedAt,
    );
    expect(other).toMatchObject({ ok: true, value: 'not to cache' });
    const answered = await Promise.race([owner, sleep(2_500).then(() => undefined)]);
    hung.resolve('late');
    expect(answered).toMatchObject({ ok: true, value: 'not to cache' });
  }, 30_000);
});
