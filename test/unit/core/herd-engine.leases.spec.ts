import { describe, expect, it } from '@jest/globals';
import { type CachePolicy, HerdEngine, type LoadContext, MemoryStore } from '../../../lib/index.js';
import { MIN_STUCK_MS } from '../../../lib/core/load-durations.js';
import { ManualClock } from '../../helpers/clock.js';
import { counted } from '../../helpers/counted.js';
import { deferred, flush, sleep, until } from '../../helpers/deferred.js';
import { memoryEngine } from '../../helpers/engine.js';

describe('HerdEngine leases across processes sharing one store', () => {
  it('makes a follower wait for the lease owner and wakes it with the fill, without loading', async () => {
    const store = new MemoryStore();
    const owner = new HerdEngine({ store });
    const follower = new HerdEngine({ store });
    const gate = deferred<string>();
    const ownerLoader = counted(() => gate.promise);
    const followerLoader = counted(() => 'should not run');
    const owned = owner.getOrLoad('k', ownerLoader);
    await flush();
    const followed = follower.read('k', followerLoader);
    await until(() => follower.stats().waits.started === 1);
    gate.resolve('filled');
    await expect(owned).resolves.toBe('filled');
    await expect(followed).resolves.toMatchObject({ value: 'filled', path: 'miss' });
    expect(followerLoader.calls).toBe(0);
    // Woken by the fill itself: it never had to take the lease (which a timed-out follower would).
    expect(follower.stats().leases.acquired).toBe(0);
    expect(store.watchers).toBe(0);
  });

  it("takes a stuck owner's lease over after waitTimeout: one takeover load, and the stuck load is fenced", async () => {
    const store = new MemoryStore();
    const owner = new HerdEngine({ store, policy: { leaseTtl: '10s' } });
    const gate = deferred<string>();
    const owned = owner.getOrLoad('k', () => gate.promise);
    await flush();
    const followers = [1, 2, 3].map(
      () => new HerdEngine({ store, policy: { waitTimeout: '30ms' } }),
    );
    const takeover = counted((context: LoadContext<string>) =>
      context.fence === undefined ? 'unleased' : 'taken over',
    );
    const answers = await Promise.all(
      followers.map((follower) => follower.getOrLoad('k', takeover)),
    );
    expect(answers).toEqual(['taken over', 'taken over', 'taken over']);
    expect(takeover.calls).toBe(1);
    gate.resolve('stuck');
    await expect(owned).resolves.toBe('stuck');
    await expect(followers[0]!.getOrLoad('k', takeover)).resolves.toBe('taken over');
  });

  it("takes a hung owner over well before waitTimeout when the key usually loads fast, and answers the hung process's own callers with the takeover's value", async () => {
    const store = new MemoryStore();
    // waitTimeout far beyond this test's limits: only the adaptive threshold can answer in time.
    const policy: CachePolicy = { waitTimeout: '60s', leaseTtl: '10s' };
    const engines = [0, 1, 2].map(() => new HerdEngine({ store, policy }));
    // A first herd: every process sees how long a load of `k` takes (here: until the gate opens).
    const first = deferred<string>();
    const usual = counted(() => first.promise);
    const herd = engines.map((engine) => engine.getOrLoad('k', usual));
    await until(() => engines[1]!.stats().waits.started + engines[2]!.stats().waits.started === 2);
    first.resolve('v1');
    await expect(Promise.all(herd)).resolves.toEqual(['v1', 'v1', 'v1']);
    expect(usual.calls).toBe(1);
    await engines[0]!.delete('k');

    // The key's next owner hangs (a query that never returns).
    const hung = deferred<string>();
    const signals: AbortSignal[] = [];
    const hungLoader = counted((context: LoadContext<string>) => {
      signals.push(context.signal);
      return hung.promise;
    });
    const takeover = counted((context: LoadContext<string>) =>
      context.fence === undefined ? 'unleased' : 'taken over',
    );
    const answers: unknown[] = [];
    const answer = (value: unknown): number => answers.push(value);
    const own = [1, 2, 3].map(() =>
      engines[0]!.getOrLoad('k', hungLoader).catch((error: unknown) => error),
    );
    await until(() => hungLoader.calls === 1);
    const others = engines
      .slice(1)
      .flatMap((engine) => [1, 2, 3].map(() => engine.getOrLoad('k', takeover)));
    for (const call of [...own, ...others]) void call.then(answer, answer);
    await until(() => answers.length === 9, 15_000, 'every caller to be answered');
    expect(answers).toEqual(Array.from({ length: 9 }, () => 'taken over'));
    expect(hungLoader.calls + takeover.calls).toBe(2);
    expect(engines[0]!.activity().loaders).toBe(0);
    // The hung loader is told that its value is no longer wanted.
    expect(signals[0]!.aborted).toBe(true);

    // The hung load ends after all: its late value is fenced, the takeover's stays.
    hung.resolve('late');
    await flush();
    for (const engine of engines)
      await expect(engine.getOrLoad('k', takeover)).resolves.toBe('taken over');
    expect(takeover.calls).toBe(1);
    await Promise.all(engines.map((engine) => engine.close()));
  }, 20_000);

  it('takes a hung owner over after MIN_STUCK_MS when the key loads within the same millisecond of the clock', async () => {
    // The clock of the entries stands still: a load is over within one of its milliseconds, as a
    // load answered from memory or a fast query is on a real clock.
    const clock = new ManualClock();
    const store = new MemoryStore({ now: clock.now });
    const policy: CachePolicy = { waitTimeout: '60s', leaseTtl: '10s' };
    const engines = [0, 1].map(() => new HerdEngine({ store, policy, now: clock.now }));
    const first = deferred<string>();
    const herd = engines.map((engine) => engine.getOrLoad('k', () => first.promise));
    await until(() => engines[1]!.stats().waits.started === 1);
    first.resolve('v1');
    await expect(Promise.all(herd)).resolves.toEqual(['v1', 'v1']);
    await engines[0]!.delete('k');

    const hung = deferred<string>();
    const owned = engines[0]!.getOrLoad('k', () => hung.promise);
    await until(() => engines[0]!.activity().loaders === 1);
    const takeover = counted(() => 'taken over');
    const startedAt = performance.now();
    const followed = engines[1]!.getOrLoad('k', takeover);
    // Without a usual load time the follower would wait the whole 60 s waitTimeout.
    const answer = await Promise.race([followed, sleep(MIN_STUCK_MS + 10_000).then(() => 'none')]);
    expect(answer).toBe('taken over');
    expect(performance.now() - startedAt).toBeGreaterThanOrEqual(MIN_STUCK_MS - 50);
    expect(takeover.calls).toBe(1);
    await expect(owned).resolves.toBe('taken over');
    hung.resolve('late');
    await Promise.all(engines.map((engine) => engine.close()));
  }, 20_000);

  it('keeps the lease alive while a load outlives the lease TTL, so no second loader starts', async () => {
    const store = new MemoryStore();
    const a = new HerdEngine({ store, policy: { leaseTtl: '30ms', waitTimeout: '2s' } });
    const b = new HerdEngine({ store, policy: { leaseTtl: '30ms', waitTimeout: '2s' } });
    const gate = deferred<string>();
    const loader = counted(() => gate.promise);
    const first = a.getOrLoad('k', loader);
    await sleep(100); // over three lease TTLs
    const second = b.getOrLoad('k', loader);
    await until(() => b.stats().waits.started === 1);
    gate.resolve('once');
    await expect(Promise.all([first, second])).resolves.toEqual(['once', 'once']);
    expect(loader.calls).toBe(1);
  });

  it('hands each new lease a larger fencing number', async () => {
    const engine = memoryEngine({ policy: { soft: '1ms', hard: '1ms', jitter: 0 } });
    const fences: number[] = [];
    for (let i = 0; i < 3; i += 1) {
      await engine.getOrLoad('k', (context) => {
        fences.push(context.fence!);
        return i;
      });
      await sleep(2);
    }
    expect(fences[1]).toBeGreaterThan(fences[0]!);
    expect(fences[2]).toBeGreaterThan(fences[1]!);
  });
});
