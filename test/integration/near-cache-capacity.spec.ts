import { describe, expect, it } from '@jest/globals';
import type { RedisStoreOptions } from '../../lib/redis.js';
import { sleep } from '../helpers/deferred.js';
import { told } from '../helpers/notifications.js';
import { useRedisServer } from '../helpers/redis-fixture.js';

/**
 * What fills a pod's near cache. README (Near cache): "Each pod keeps copies of the envelopes it
 * reads and writes in its own memory (an LRU bounded by maxEntries and maxBytes...)".
 */

let run = 0;
const redis = useRedisServer();

function startPod(namespace: string, options: Partial<RedisStoreOptions> = {}) {
  return redis.pod({ url: redis.server.url, namespace, ...options });
}

/** MGETs Redis ran while `action` ran (seen with MONITOR). */
async function mgetsDuring(action: () => Promise<unknown>): Promise<number> {
  const base = redis.server.client();
  const monitor = await base.monitor();
  let mgets = 0;
  monitor.on('monitor', (_time: string, args: string[]) => {
    if (args[0]?.toLowerCase() === 'mget') mgets += 1;
  });
  try {
    await action();
    await sleep(50); // MONITOR lines arrive after the replies
    return mgets;
  } finally {
    monitor.disconnect();
    base.disconnect();
  }
}

describe('near cache: capacity', () => {
  it('keeps the copies of the keys it reads when other pods fill keys it never reads', async () => {
    const namespace = `near-capacity${(run += 1)}`;
    const reader = await startPod(namespace, { nearCache: { maxEntries: 100 } });
    const other = await startPod(namespace);
    const mine = Array.from({ length: 50 }, (_, i) => `mine:${i}`);
    for (const key of mine) await reader.engine.getOrLoad(key, async () => key);
    // Answered from memory: no round trip.
    await expect(
      mgetsDuring(() =>
        Promise.all(mine.map((key) => reader.engine.getOrLoad(key, async () => 'x'))),
      ),
    ).resolves.toBe(0);

    // Other pods load 200 keys this pod never reads (their traffic, not this pod's).
    for (let i = 0; i < 200; i += 1)
      await other.engine.getOrLoad(`theirs:${i}`, async () => `value ${i}`);
    await told(redis.server, reader.store);

    // This pod's working set is still answered from memory.
    const mgets = await mgetsDuring(() =>
      Promise.all(mine.map((key) => reader.engine.getOrLoad(key, async () => 'x'))),
    );
    expect(mgets).toBe(0);
  });
});
