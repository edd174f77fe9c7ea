import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from '@jest/globals';
import { useRedisServer } from '../helpers/redis-fixture.js';

/**
 * What the near cache's byte bound costs in the heap. README (Near cache): copies are kept in "an
 * LRU bounded by `maxEntries` and `maxBytes`"; issue: "memory stays within the byte bound".
 */

setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;

const redis = useRedisServer();

function heapUsedAfterGc(): number {
  collectGarbage();
  collectGarbage();
  return process.memoryUsage().heapUsed;
}

describe('near cache: memory', () => {
  it('holds its copies within about maxBytes of heap, whatever the shape of the values', async () => {
    const maxBytes = 4 * 1024 * 1024;
    const { store, engine } = await redis.pod({
      url: redis.server.url,
      namespace: 'near-memory',
      nearCache: { maxBytes },
    });
    // A plain value as loaders return it: a list of 500 timestamps (the default v8 serializer keeps Dates).
    const timestamps = (i: number): Date[] =>
      Array.from({ length: 500 }, (_, j) => new Date(i * 1_000 + j));

    const before = heapUsedAfterGc();
    for (let i = 0; i < 1_500; i += 1) await engine.getOrLoad(`k${i}`, async () => timestamps(i));
    const grownBytes = heapUsedAfterGc() - before;

    // The cache counts itself within the bound...
    expect(store.nearCache.bytes).toBeLessThanOrEqual(maxBytes);
    // ...and the heap it holds should be of that order: twice the bound leaves room for everything
    // else 1,500 loads leave behind (about 1.5 MB measured with the near cache holding one copy).
    expect(grownBytes).toBeLessThanOrEqual(2 * maxBytes);
  });
});
