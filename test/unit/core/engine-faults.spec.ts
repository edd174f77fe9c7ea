import { describe, expect, it } from '@jest/globals';
import {
  type CachePolicy,
  ConfigurationError,
  HerdEngine,
  InvalidKeyError,
  type LoadContext,
  LoaderTimeoutError,
  MemoryStore,
} from '../../../lib/index.js';
import { counted } from '../../helpers/counted.js';
import { deferred, sleep, until } from '../../helpers/deferred.js';
import { memoryEngine } from '../../helpers/engine.js';

/** A loader that never settles on its own: it rejects when its signal fires. */
function hanging<T>() {
  return counted(
    (context: LoadContext<T>) =>
      new Promise<T>((_, reject) => {
        context.signal.addEventListener('abort', () => reject(context.signal.reason as Error), {
          once: true,
        });
      }),
  );
}

describe('HerdEngine faults', () => {
  it('lets expire() end a refresh backoff held by another pod, so the next read refreshes at once', async () => {
    const store = new MemoryStore();
    const policy = { soft: '1h', backoff: { initial: '1h', max: '1h' } } as const;
    const [a, b] = [new HerdEngine({ store, policy }), new HerdEngine({ store, policy })];
    await a.getOrLoad('k', () => 'v1');
    await a.expire('k');
    const failed = await a.read('k', () => Promise.reject(new Error('db down')));
    await failed.revalidated; // pod A now holds the lease for an hour of backoff
    await b.expire('k');
    const loader = counted(() => 'v2');
    const stale = await b.read('k', loader);
    expect(stale).toMatchObject({ value: 'v1', path: 'stale' });
    await expect(stale.revalidated).resolves.toMatchObject({ value: 'v2' });
    expect(loader.calls).toBe(1);
  });

  it('does not count refreshes aborted by close() as loader failures, and lets their leases go', async () => {
    const store = new MemoryStore();
    const closing = new HerdEngine({ store, policy: { soft: '1h' } });
    await closing.getOrLoad('k', () => 'v1');
    await closing.expire('k');
    const refresh = hanging<string>();
    await closing.read('k', refresh);
    await until(() => refresh.calls === 1);
    await closing.close();
    expect(closing.stats().loads.failed).toBe(0);
    expect(closing.stats().backoffs).toBe(0);
    const other = new HerdEngine({ store, policy: { soft: '1h' } });
    const loader = counted(() => 'v2');
    const stale = await other.read('k', loader);
    await expect(stale.revalidated).resolves.toMatchObject({ value: 'v2' });
    expect(loader.calls).toBe(1);
  });

  it.each<[string, CachePolicy]>([
    ['policy.waitTimeout', { waitTimeout: 2 ** 31 }],
    ['policy.leaseTtl', { leaseTtl: '25d' }],
    ['policy.loaderHardTimeout', { loaderHardTimeout: 2 ** 31 }],
    ['policy.loaderSoftTimeout', { loaderSoftTimeout: '30d' }],
  ])('rejects %s longer than a timer can wait (2^31 - 1 ms)', (field, policy) => {
    expect(() => memoryEngine({ policy })).toThrow(
      expect.objectContaining({ field }) as unknown as Error,
    );
  });

  it('rejects a per-call timeout longer than a timer can wait, and accepts long TTLs', async () => {
    const engine = memoryEngine({ policy: { soft: '30d', hard: '300d' } });
    await expect(engine.getOrLoad('k', () => 1, { timeout: 2 ** 31 })).rejects.toBeInstanceOf(
      ConfigurationError,
    );
    await expect(engine.getOrLoad('k', () => 1)).resolves.toBe(1);
  });

  it('times a follower out by the monotonic clock: a wall clock jumping an hour ahead does not end its wait', async () => {
    const store = new MemoryStore();
    const owner = new HerdEngine({ store, policy: { soft: '2h' } });
    const gate = deferred<string>();
    const owned = owner.getOrLoad('k', () => gate.promise);
    let jump = 0;
    const follower = new HerdEngine({
      store,
      now: () => Date.now() + jump,
      policy: { waitTimeout: '5s', soft: '2h' },
    });
    const followed = follower.getOrLoad('k', () => 'loaded by the follower');
    await until(() => follower.stats().waits.started === 1);
    jump = 3_600_000;
    gate.resolve('filled');
    await owned;
    await expect(followed).resolves.toBe('filled');
    expect(follower.stats().waits.timedOut).toBe(0);
  });

  it('rejects keys and tags with a lone UTF-16 surrogate, which would collide with other keys once encoded', async () => {
    const engine = memoryEngine();
    await expect(engine.getOrLoad('product:\uD800', () => 1)).rejects.toBeInstanceOf(
      InvalidKeyError,
    );
    await expect(engine.getOrLoad('product:\uDC00x', () => 1)).rejects.toBeInstanceOf(
      InvalidKeyError,
    );
    await expect(engine.expireTag('t\uD800')).rejects.toBeInstanceOf(ConfigurationError);
    await expect(engine.getOrLoad('k', () => 1, { tags: ['t\uDFFF'] })).rejects.toBeInstanceOf(
      ConfigurationError,
    );
    // Well-formed pairs are fine.
    await expect(engine.getOrLoad('emoji:🦄', () => 1, { tags: ['🦄'] })).resolves.toBe(1);
  });
});

describe('HerdEngine lease keep-alive', () => {
  it("keeps a stuck owner's lease until loaderHardTimeout aborts its loader, then shares the timeout for the backoff", async () => {
    const store = new MemoryStore();
    const owner = new HerdEngine({
      store,
      policy: { leaseTtl: '60ms', loaderHardTimeout: '100ms', backoff: { initial: '1s' } },
    });
    const stuck = hanging<string>();
    const owned = owner.getOrLoad('k', stuck).catch((error: unknown) => error);
    await until(() => stuck.calls === 1);
    await expect(owned).resolves.toBeInstanceOf(LoaderTimeoutError);
    const other = new HerdEngine({ store, policy: { waitTimeout: '5s' } });
    // Within the backoff (at least 0.5 s), the other engine learns the timeout at once.
    const loader = counted(() => 'loaded');
    await expect(other.getOrLoad('k', loader)).rejects.toBeInstanceOf(LoaderTimeoutError);
    expect(loader.calls).toBe(0);
    await sleep(1_050);
    await expect(other.getOrLoad('k', loader)).resolves.toBe('loaded');
    expect(other.stats().waits.started).toBe(0);
    await owner.close();
  });
});
