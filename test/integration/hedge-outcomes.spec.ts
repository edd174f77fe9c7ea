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
      const answers = await Promise.all([holder, hedger, waiter]);
      // One answer releases every waiter, the holder's own callers too, long before its load ends.
      for (const answer of answers) {
        expect(answer.ok).toBe(false);
        expect(String(answer.value)).toContain('hedge attempt failed');
        expect(answer.atMs).toBeLessThan(2_000);
      }
      // The holder's value, when it comes, ends the failure's backoff: it answers the next reads.
      await sleep(2_700 - (performance.now() - startedAt));
      const loader = async (): Promise<string> => 'reloaded';
      for (const engine of [a, b, c])
        await expect(engine.getOrLoad('k', loader)).resolves.toBe('good');
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
