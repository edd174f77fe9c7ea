import { afterAll, beforeAll } from '@jest/globals';
import { HerdEngine } from '../../lib/index.js';
import { RedisStore } from '../../lib/redis.js';
import { RedisServer, stopAllRedisServers } from '../helpers/redis-server.js';
import { describeInvalidation } from './invalidation.scenarios.js';

let server: RedisServer;
let run = 0;

beforeAll(async () => {
  server = await RedisServer.start();
});

afterAll(async () => {
  await stopAllRedisServers();
});

// Each engine is a pod: its own Redis connections, memory and clock.
describeInvalidation('Redis store', async ({ count, policy, clockOffsetsMs }) => {
  const namespace = `inv${(run += 1)}`;
  const stores = Array.from(
    { length: count },
    () => new RedisStore({ url: server.url, namespace, nearCache: false }),
  );
  await Promise.all(stores.map((store) => store.ready(10_000)));
  const engines = stores.map((store, i) => {
    const offsetMs = clockOffsetsMs?.[i] ?? 0;
    return new HerdEngine({ store, policy, now: () => Date.now() + offsetMs });
  });
  return {
    engines,
    close: async () => {
      await Promise.all(engines.map((engine) => engine.close()));
      await Promise.all(stores.map((store) => store.close()));
    },
  };
});
