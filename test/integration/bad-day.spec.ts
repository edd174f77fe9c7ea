import { afterAll, describe, expect, it } from '@jest/globals';
import { type CachePolicy, LoaderFailedError, type LoadContext } from '../../lib/index.js';
import { deferred, sleep, until } from '../helpers/deferred.js';
import type { Pod } from '../helpers/pods.js';
import { redisPodsPerTest } from '../helpers/redis-pods.js';

// The backend on a bad day, on a real Redis with several pods (each its own connections, memory
// and engine): slow for every key at once, hung for one, answering values that must not be cached,
// or failing. One answer releases every waiter in the cluster; no path queues pods behind each other.

const redis = redisPodsPerTest('bad-day');
/** The pods of the running test. */
let pods: readonly Pod[] = [];
/** What each case measured: printed as a table with HERD_REPORT=1 (the README cites it). */
const figures: Array<Record<string, string | number>> = [];

afterAll(() => {
  if (process.env['HERD_REPORT'] === '1') console.table(figures);
});

const lastMs = (answers: ReadonlyArray<{ atMs: number }>): number =>
  Math.round(Math.max(...answers.map((answer) => answer.atMs)));

async function cluster(count: number, policy: CachePolicy): Promise<readonly Pod[]> {
  pods = await redis.start(count, policy);
  return pods;
}

/** A backend shared by every pod: one delay for every key, loads counted per key. */
class Backend {
  delayMs: number;
  readonly loads = new Map<string, number>();

  constructor(delayMs: number) {
    this.delayMs = delayMs;
  }

  get total(): number {
    let sum = 0;
    for (const count of this.loads.values()) sum += count;
    return sum;
  }

  readonly load = async (context: LoadContext<string>): Promise<string> => {
    const call = (this.loads.get(context.key) ?? 0) + 1;
    this.loads.set(context.key, call);
    await sleep(this.delayMs);
    return `${context.key} #${call}`;
  };
}

/** When each call settled, in ms since `startedAt` (`performance.now()`). */
function timed<T>(
  call: Promise<T>,
  startedAt: number,
): Promise<{ ok: boolean; value: unknown; atMs: number }> {
  return call.then(
    (value) => ({ ok: true, value, atMs: performance.now() - startedAt }),
    (error: unknown) => ({ ok: false, value: error, atMs: performance.now() - startedAt }),
  );
}

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

describe('a backend that slows down for every key at once', () => {
  it('loads each key about once cluster-wide (takeovers stay within their budget), and the first good result answers every waiter', async () => {
    const keys = Array.from({ length: 20 }, (_, i) => `item:${i}`);
    await cluster(4, { soft: '1h', waitTimeout: '30s', leaseTtl: '5s' });
    const backend = new Backend(50);
    // Healthy: every pod learns that these keys load in about 50 ms.
    for (let round = 0; round < 3; round += 1) {
      await Promise.all(
        pods.flatMap(({ engine }) => keys.map((k) => engine.getOrLoad(k, backend.load))),
      );
      for (const k of keys) await pods[0]!.engine.delete(k);
    }
    // Now every load takes 2 s: 4 pods x 5 callers ask for each key.
    backend.delayMs = 2_000;
    backend.loads.clear();
    const startedAt = performance.now();
    const answers = await Promise.all(
      pods.flatMap(({ engine }) =>
        keys.flatMap((k) =>
          Array.from({ length: 5 }, () => timed(engine.getOrLoad(k, backend.load), startedAt)),
        ),
      ),
    );
    figures.push({
      case: 'slow backend: 20 keys, 4 pods x 5 callers, loads 50 ms -> 2 s',
      loads: backend.total,
      'last answer (ms)': lastMs(answers),
    });
    expect(answers.filter((answer) => !answer.ok)).toEqual([]);
    // At most 10 % more loads than keys (the hedge budget), where a takeover per key doubled them.
    expect(backend.total).toBeLessThanOrEqual(keys.length * 1.1);
    // Every caller is answered by the first load of its key to end (2 s), not by a takeover's
    // load that started a second later.
    expect(Math.max(...answers.map((answer) => answer.atMs))).toBeLessThan(2_000 + 600);
  }, 60_000);
});

describe('a hung owner of a cold key', () => {
  it('is hedged early: 7 pods x 100 callers are answered within 1.5 s at p99, with at most 2 loads', async () => {
    await cluster(8, {});
    const hung = deferred<string>();
    let hungLoads = 0;
    const owner = pods[0]!.engine.getOrLoad('cold', () => {
      hungLoads += 1;
      return hung.promise;
    });
    void owner.catch(() => undefined);
    await until(() => hungLoads === 1, 5_000, 'the owner to load');
    await sleep(200);
    let loads = 0;
    const quick = async (): Promise<string> => {
      loads += 1;
      await sleep(100);
      return 'loaded';
    };
    const startedAt = performance.now();
    const answers = await Promise.all(
      pods
        .slice(1)
        .flatMap(({ engine }) =>
          Array.from({ length: 100 }, () => timed(engine.getOrLoad('cold', quick), startedAt)),
        ),
    );
    const times = answers.map((answer) => answer.atMs);
    figures.push({
      case: 'hung owner of a cold key: 7 pods x 100 callers, 100 ms loader',
      loads: hungLoads + loads,
      'p50 (ms)': Math.round(percentile(times, 50)),
      'p99 (ms)': Math.round(percentile(times, 99)),
      'last answer (ms)': lastMs(answers),
    });
    expect(answers.filter((answer) => !answer.ok)).toEqual([]);
    expect(answers.every((answer) => answer.value === 'loaded')).toBe(true);
    expect(hungLoads + loads).toBeLessThanOrEqual(2);
    expect(
      percentile(
        answers.map((answer) => answer.atMs),
        99,
      ),
    ).toBeLessThanOrEqual(1_500);
    // The hung pod's own caller gets the takeover's value, whether or not its loader ever ends.
    await expect(owner).resolves.toBe('loaded');
    hung.resolve('late');
  }, 30_000);
});

describe('a value its loader marks doNotCache', () => {
  it('releases the waiters of every pod with the one result, and later reads load in parallel instead of queueing', async () => {
    await cluster(6, { waitTimeout: '30s' });
    const loadMs = 2_200;
    let loads = 0;
    const uncacheable = async (context: LoadContext<string>): Promise<string> => {
      loads += 1;
      const call = loads;
      await sleep(loadMs);
      context.doNotCache();
      return `answer #${call}`;
    };
    // A herd on 6 pods: one pod loads; the others wait for it and get its answer at once.
    let startedAt = performance.now();
    const first = await Promise.all(
      pods.flatMap(({ engine }) =>
        Array.from({ length: 10 }, () => timed(engine.getOrLoad('admin', uncacheable), startedAt)),
      ),
    );
    figures.push({
      case: 'doNotCache (2.2 s load), 6 pods x 10 callers: first herd',
      loads,
      'last answer (ms)': lastMs(first),
    });
    expect(first.filter((answer) => !answer.ok)).toEqual([]);
    expect(new Set(first.map((answer) => answer.value))).toEqual(new Set(['answer #1']));
    // One load, and at most one hedge of it (a cold key's load is hedged after a second, within
    // the hedge budget); the hedge takes the first load's answer when that ends first.
    expect(loads).toBeLessThanOrEqual(2);
    const afterFirst = loads;
    expect(Math.max(...first.map((answer) => answer.atMs))).toBeLessThanOrEqual(loadMs + 200);
    // The next herd does not queue behind a lease: each pod loads (once), all at the same time.
    startedAt = performance.now();
    const second = await Promise.all(
      pods.flatMap(({ engine }) =>
        Array.from({ length: 10 }, () => timed(engine.getOrLoad('admin', uncacheable), startedAt)),
      ),
    );
    figures.push({
      case: 'doNotCache: the next herd (loads beside each other)',
      loads: loads - afterFirst,
      'last answer (ms)': lastMs(second),
    });
    expect(second.filter((answer) => !answer.ok)).toEqual([]);
    expect(loads).toBe(afterFirst + pods.length);
    expect(Math.max(...second.map((answer) => answer.atMs))).toBeLessThanOrEqual(loadMs + 200);
  }, 60_000);
});

describe('a cold load that fails', () => {
  it('fails every waiter of every pod at once with the same error, then retries once per cluster per backoff step', async () => {
    await cluster(6, { waitTimeout: '30s', backoff: { initial: '1s', max: '1s' } });
    const failMs = 2_000;
    let attempts = 0;
    const failing = async (): Promise<string> => {
      attempts += 1;
      const attempt = attempts;
      await sleep(failMs);
      throw new Error(`database unavailable (attempt ${attempt})`);
    };
    const startedAt = performance.now();
    const answers = await Promise.all(
      pods.flatMap(({ engine }) =>
        Array.from({ length: 10 }, () => timed(engine.getOrLoad('report', failing), startedAt)),
      ),
    );
    figures.push({
      case: 'failing cold load (fails after 2 s), 6 pods x 10 callers',
      loads: attempts,
      'last answer (ms)': lastMs(answers),
    });
    // One attempt, and at most one hedge of it within the hedge budget; every caller gets the
    // first attempt's error.
    expect(attempts).toBeLessThanOrEqual(2);
    const firstStep = attempts;
    for (const answer of answers) {
      expect(answer.ok).toBe(false);
      expect(answer.value).toBeInstanceOf(LoaderFailedError);
      expect((answer.value as Error).message).toContain('database unavailable (attempt 1)');
    }
    expect(Math.max(...answers.map((answer) => answer.atMs))).toBeLessThanOrEqual(failMs + 200);
    // Within the backoff, reads on every pod fail at once without another attempt.
    const during = await Promise.all(
      pods.map(({ engine }) => timed(engine.getOrLoad('report', failing), performance.now())),
    );
    figures.push({
      case: 'failing: a read on each pod within the backoff',
      loads: attempts - firstStep,
      'last answer (ms)': lastMs(during),
    });
    expect(during.every((answer) => !answer.ok && answer.atMs < 200)).toBe(true);
    expect(attempts).toBe(firstStep);
    // After the backoff, one attempt for the whole cluster.
    await sleep(1_100);
    await Promise.all(pods.map(({ engine }) => engine.getOrLoad('report', failing).catch(() => 0)));
    expect(attempts).toBe(firstStep + 1);
  }, 60_000);
});

describe('a loader whose value cannot be stored', () => {
  it('fails every waiter of every pod at once, as a failed load, not one pod after another', async () => {
    await cluster(4, { waitTimeout: '20s', serializer: 'json' });
    const loadMs = 700;
    let loads = 0;
    const unstorable = async (): Promise<unknown> => {
      loads += 1;
      await sleep(loadMs);
      // The json serializer refuses a Date (it would read back as a string).
      return { at: new Date() };
    };
    const startedAt = performance.now();
    const answers = await Promise.all(
      pods.flatMap(({ engine }) =>
        Array.from({ length: 5 }, () => timed(engine.getOrLoad('bad', unstorable), startedAt)),
      ),
    );
    figures.push({
      case: 'a value the serializer refuses (700 ms load), 4 pods x 5 callers',
      loads,
      'last answer (ms)': lastMs(answers),
    });
    expect(answers.every((answer) => !answer.ok)).toBe(true);
    expect(loads).toBe(1);
    expect(Math.max(...answers.map((answer) => answer.atMs))).toBeLessThanOrEqual(loadMs + 200);
  }, 30_000);
});
