import { afterAll, beforeAll } from '@jest/globals';
import type { HerdStore } from '../../lib/index.js';
import { RedisStore } from '../../lib/redis.js';
import { RedisServer, stopAllRedisServers } from '../helpers/redis-server.js';
import { told } from '../helpers/notifications.js';
import { type StoreFixture, describeStoreContract } from './store.contract.js';

let server: RedisServer;
let run = 0;

beforeAll(async () => {
  server = await RedisServer.start();
});

afterAll(async () => {
  await stopAllRedisServers();
});

async function pair(nearCache: boolean): Promise<StoreFixture> {
  run += 1;
  const namespace = `contract${run}`;
  const store = new RedisStore({ url: server.url, namespace, nearCache });
  const peer = new RedisStore({ url: server.url, namespace, nearCache });
  await Promise.all([store.ready(), peer.ready()]);
  return {
    store,
    peer,
    // Copies follow a peer's changes when its notification arrives (README, Near cache).
    ...(nearCache ? { settle: (from: HerdStore) => told(server, from as RedisStore) } : {}),
    close: async () => {
      await Promise.all([store.close(), peer.close()]);
    },
  };
}

describeStoreContract('redis', () => pair(false));
describeStoreContract('redis with the near cache', () => pair(true));
