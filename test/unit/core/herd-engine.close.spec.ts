import { getEventListeners } from 'node:events';
import { describe, expect, it } from '@jest/globals';
import { ClosedError, HerdEngine, MemoryStore } from '../../../lib/index.js';
import { counted } from '../../helpers/counted.js';
import { activeTimers, deferred, flush, sleep, until } from '../../helpers/deferred.js';
import { memoryEngine } from '../../helpers/engine.js';

describe('HerdEngine close and cleanup', () => {
  it('leaves no inflight entry, timer, watcher or listener after 10,000 random calls', async () => {
    const store = new MemoryStore();
    const engine = new HerdEngine({
      store,
      policy: {
        soft: 2,
        hard: 6,
        jitter: 0,
        negativeTtl: 1,
        leaseTtl: 20,
        waitTimeout: 10,
        loaderHardTimeout: 4,
        backoff: { initial: 1, max: 4 },
      },
    });
    const timersBefore = activeTimers();
    let seed = 7;
    const random = (): number => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed / 2_147_483_648;
    };
    const signals: AbortSignal[] = [];
    const calls: Promise<unknown>[] = [];
    for (let i = 0; i < 10_000; i += 1) {
      const key = `k${Math.floor(random() * 30)}`;
      const roll = random();
      const delay = Math.floor(random() * 8);
      const loader = (): Promise<string | null> | string => {
        if (roll < 0.1) throw new Error('sync');
        if (roll < 0.25) return Promise.reject(new Error('async'));
        if (roll < 0.3) return Promise.resolve(null);
        if (roll < 0.6) return new Promise((resolve) => setTimeout(() => resolve('slow'), delay));
        return 'fast';
      };
      const controller = new AbortController();
      signals.push(controller.signal);
      const choice = random();
      const options =
        choice < 0.2
          ? { timeout: Math.floor(random() * 4) }
          : choice < 0.4
            ? { signal: controller.signal }
            : {};
      calls.push(engine.getOrLoad(key, loader, options).catch(() => undefined));
      if (random() < 0.2) controller.abort();
      if (i % 250 === 0) await sleep(1);
    }
    await Promise.all(calls);
    await until(() => {
      const activity = engine.activity();
      return activity.inflight === 0 && activity.loaders === 0 && activity.pendingStoreOps === 0;
    });
    await until(() => activeTimers() <= timersBefore, 5_000, 'loader timers to finish');
    expect(engine.activity()).toEqual({
      inflight: 0,
      armedWaits: 0,
      loaders: 0,
      pendingStoreOps: 0,
    });
    expect(store.watchers).toBe(0);
    expect(
      signals.reduce((sum, signal) => sum + getEventListeners(signal, 'abort').length, 0),
    ).toBe(0);
    expect(activeTimers()).toBeLessThanOrEqual(timersBefore);
  });

  it('aborts running loaders on close and refuses new reads', async () => {
    const engine = memoryEngine();
    let signal: AbortSignal | undefined;
    const pending = engine.getOrLoad('k', (context) => {
      signal = context.signal;
      return new Promise<string>(() => undefined);
    });
    await flush();
    await engine.close();
    expect(signal?.aborted).toBe(true);
    await expect(pending).rejects.toBeInstanceOf(ClosedError);
    await expect(engine.getOrLoad('k', () => 'v')).rejects.toBeInstanceOf(ClosedError);
  });

  it('stops a waiting follower on close, without loading', async () => {
    const store = new MemoryStore();
    const owner = new HerdEngine({ store });
    const follower = new HerdEngine({ store });
    const gate = deferred<string>();
    const owned = owner.getOrLoad('k', () => gate.promise);
    await flush();
    const followerLoader = counted(() => 'must not run');
    const followed = follower.getOrLoad('k', followerLoader);
    await until(() => follower.stats().waits.started === 1);
    await follower.close();
    await expect(followed).rejects.toBeInstanceOf(ClosedError);
    expect(followerLoader.calls).toBe(0);
    gate.resolve('v');
    await expect(owned).resolves.toBe('v');
  });
});
