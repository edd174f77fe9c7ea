import { afterAll, beforeAll } from '@jest/globals';
import { RedisStore } from '../../lib/redis.js';
import { RedisServer, stopAllRedisServers } from '../helpers/redis-server.js';
import { describeStoreContract } from './store.contract.js';

let server: RedisServer;
let run = 0;

beforeAll(async () => {
  server = await RedisServer.start();
});

afterAll(async () => {
  await stopAllRedisServers();
});

describeStoreContract('redis', async () => {
  run += 1;
  const namespace = `contract${run}`;
  const store = new RedisStore({ url: server.url, namespace });
  const peer = new RedisStore({ url: server.url, namespace });
  await Promise.all([store.ready(), peer.ready()]);
  return {
    store,
    peer,
    close: async () => {
      await Promise.all([store.close(), peer.close()]);
    },
  };
});
