import { afterAll, beforeAll, describe, it } from '@jest/globals';
import { RedisServer, stopAllRedisServers } from '../helpers/redis-server.js';
import { MODEL_TIMEOUT_MS, checkModel } from './engine.model.js';
import { redisModelCluster } from './redis-model-cluster.js';

/**
 * The engine model on Redis without the near cache, where the strict guarantee holds for every pod;
 * scenarios also stall Redis (loads then run without a lease) and kill and restart it.
 */

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
    'keeps every promise of invalidation, expiry, leases and cleanup under random interleavings of 2-3 pods, Redis stalls and restarts',
    async () => {
      await checkModel(
        (setup) =>
          redisModelCluster(setup, {
            server,
            namespace: `model${(run += 1)}`,
            store: { nearCache: false, commandTimeout: 100, breakerCooldown: 100 },
          }),
        12,
        { faults: true },
      );
    },
    MODEL_TIMEOUT_MS,
  );
});
