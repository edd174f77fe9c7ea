import { afterAll, beforeAll } from '@jest/globals';
import { HerdEngine } from '../../lib/index.js';
import { RedisStore } from '../../lib/redis.js';
import { RedisServer, stopAllRedisServers } from '../helpers/redis-server.js';
import { describeInvalidationEdges } from './invalidation-edges.scenarios.js';

let server: RedisServer;
let run = 0;

beforeAll(async () => {
  server = await RedisServer.start();
});

afterAll(async () => {
  await stopAllRedisServers();
});

// Each engine is a pod: its own Redis connections and memory.
describeInvalidationEdges('Redis store', async ({ count, policy }) => {
  const namespace = `edge${(run += 1)}`;
  const stores = Array.from(
    { length: count },
    () => new RedisStore({ url: server.url, namespace, nearCache: false }),
  );
  await Promise.all(stores.map((store) => store.ready(10_000)));
  const engines = stores.map((store) => new HerdEngine({ store, policy }));
  return {
    engines,
    close: async () => {
      await Promise.all(engines.map((engine) => engine.close()));
      await Promise.all(stores.map((store) => store.close()));
    },
  };
});
