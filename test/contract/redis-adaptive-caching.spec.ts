import { afterAll, beforeAll } from '@jest/globals';
import type { Redis } from 'ioredis';
import { HerdEngine } from '../../lib/index.js';
import { RedisStore } from '../../lib/redis.js';
import { RedisServer, stopAllRedisServers } from '../helpers/redis-server.js';
import { describeAdaptiveCaching } from './adaptive-caching.scenarios.js';

let server: RedisServer;
let raw: Redis;
let run = 0;

beforeAll(async () => {
  server = await RedisServer.start();
  raw = server.client();
});

afterAll(async () => {
  raw.disconnect();
  await stopAllRedisServers();
});

// Each engine is a pod: its own Redis connections and near cache.
describeAdaptiveCaching('Redis store', async ({ count, policy }) => {
  const namespace = `adaptive${(run += 1)}`;
  const stores = Array.from(
    { length: count },
    () => new RedisStore({ url: server.url, namespace }),
  );
  await Promise.all(stores.map((store) => store.ready(10_000)));
  const engines = stores.map((store) => new HerdEngine({ store, policy }));
  return {
    engines,
    // The value key of a plain key is `<namespace>:{<key>}:v` (lib/stores/redis/redis-keys.ts).
    storedTtlMs: async (key) => {
      const ttl = await raw.pttl(`${namespace}:{${key}}:v`);
      return ttl < 0 ? undefined : ttl;
    },
    close: async () => {
      await Promise.all(engines.map((engine) => engine.close()));
      await Promise.all(stores.map((store) => store.close()));
    },
  };
});
