import { afterAll, beforeAll, describe, it } from '@jest/globals';
import { HerdEngine } from '../../lib/index.js';
import { RedisStore } from '../../lib/redis.js';
import { RedisServer, stopAllRedisServers } from '../helpers/redis-server.js';
import { MODEL_POLICY, MODEL_TIMEOUT_MS, checkModel } from './engine.model.js';

let server: RedisServer;
let run = 0;

beforeAll(async () => {
  server = await RedisServer.start();
});

afterAll(async () => {
  await stopAllRedisServers();
});

describe('engine model on Redis', () => {
  it(
    'keeps every promise of invalidation, expiry, leases and cleanup under random interleavings of 2-3 pods',
    async () => {
      await checkModel(async (offsetsMs) => {
        const namespace = `model${(run += 1)}`;
        const stores = offsetsMs.map(
          () => new RedisStore({ url: server.url, namespace, nearCache: false }),
        );
        await Promise.all(stores.map((store) => store.ready(10_000)));
        const engines = stores.map(
          (store, i) =>
            new HerdEngine({ store, policy: MODEL_POLICY, now: () => Date.now() + offsetsMs[i]! }),
        );
        return {
          engines,
          watchers: () => stores.reduce((sum, store) => sum + store.watchers, 0),
          close: async () => {
            await Promise.all(engines.map((engine) => engine.close()));
            await Promise.all(stores.map((store) => store.close()));
          },
        };
      }, 12);
    },
    MODEL_TIMEOUT_MS,
  );
});
