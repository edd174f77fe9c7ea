import { describe, expect, it } from '@jest/globals';
import type { LoadContext } from '../../lib/index.js';
import { sleep } from '../helpers/deferred.js';
import type { Pod } from '../helpers/pods.js';
import { redisPodsPerTest } from '../helpers/redis-pods.js';

// Values are shared, not copied; a caller that mutates one (against the documented contract) must
// still not make unchanged() write its mutation to Redis for every pod.

const redis = redisPodsPerTest('mutation');

describe.each([true, false])('unchanged() with nearCache %s', (nearCache) => {
  it("stores the value as it was stored, not a caller's mutation of it", async () => {
    const [a, b] = (await redis.start(
      2,
      { soft: '100ms', hard: '1h', jitter: 0 },
      { nearCache },
    )) as [Pod, Pod];
    const stored = await a.engine.getOrLoad('k', () => ({ price: 10 }));
    // A caller edits what it was given (say, to format it for its own response).
    stored.price = 999;
    await sleep(150);
    const stale = await a.engine.read('k', (context: LoadContext<{ price: number }>) =>
      context.unchanged(),
    );
    await stale.revalidated;
    const read = await b.engine.read('k', () => ({ price: -1 }));
    expect(read).toMatchObject({ path: 'fresh', value: { price: 10 } });
  });
});
