import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { HerdEngine } from '../../lib/index.js';
import { RedisStore, type RedisStoreOptions } from '../../lib/redis.js';
import { sleep, until } from '../helpers/deferred.js';
import { FaultProxy, stopAllFaultProxies } from '../helpers/fault-proxy.js';
import { RedisServer, stopAllRedisServers } from '../helpers/redis-server.js';
import { SplitConnections } from '../helpers/split-connections.js';

/**
 * README (Near cache): with notifications late, "if Redis has not answered within 10 ms, a copy
 * held of the key answers as stale (the read goes on and updates the copy)"; (When Redis is down)
 * "Reads are answered from the envelopes this process saw last". A read that finds the key gone
 * is what the process saw last: the copy must not outlive it.
 */

let server: RedisServer;
let run = 0;
const opened: Array<{ close(): Promise<void> }> = [];

beforeAll(async () => {
  server = await RedisServer.start();
});

afterEach(async () => {
  for (const closable of opened.splice(0).reverse()) await closable.close();
  await stopAllFaultProxies();
});

afterAll(async () => {
  await stopAllRedisServers();
});

interface Pod {
  readonly store: RedisStore;
  readonly engine: HerdEngine;
}

async function startPod(namespace: string, options: RedisStoreOptions): Promise<Pod> {
  const store = new RedisStore({ namespace, ...options });
  opened.push(store);
  await store.ready(10_000);
  const engine = new HerdEngine({ store, policy: { soft: '1h' } });
  opened.push(engine);
  return { store, engine };
}

async function splitPod(namespace: string, commandPort: number, subscriberPort: number): Promise<Pod> {
  const client = new SplitConnections(
    { host: server.host, port: commandPort, enableOfflineQueue: false, maxRetriesPerRequest: 0 },
    subscriberPort,
  );
  client.on('error', () => undefined);
  opened.push({ close: async () => client.disconnect() });
  return startPod(namespace, { client, commandTimeout: 1_000 });
}

describe('near cache: a read that finds the key deleted', () => {
  it('does not answer the deleted value (as stale) when the next read of Redis is slow', async () => {
    const namespace = `near-absent${(run += 1)}`;
    const commands = await FaultProxy.start(server);
    const notifications = await FaultProxy.start(server);
    const pod = await splitPod(namespace, commands.port, notifications.port);
    const other = await startPod(namespace, { url: server.url });
    await pod.engine.getOrLoad('k', async () => 'old');

    // The pod's subscription goes away and cannot come back: its copies are no longer trusted.
    notifications.refuseNew();
    expect(notifications.dropWhere((connection) => connection.isSubscriber)).toBe(1);
    await until(() => !pod.store.nearCache.trusted, 5_000, 'copies to go untrusted');

    // Another pod deletes k; the pod reads Redis and sees that k is gone. (A read slower than 10 ms
    // is answered from the copy as stale meanwhile, by design; the reply, when it comes, still counts.)
    await other.engine.delete('k');
    let seenGone = false;
    for (let attempt = 0; attempt < 50 && !seenGone; attempt += 1) {
      seenGone = (await pod.engine.peek('k')) === undefined;
      if (!seenGone) await sleep(20);
    }
    expect(seenGone).toBe(true);

    // Redis is slow now (100 ms per reply). What the pod saw last of k is that it is gone.
    commands.delay(100, 'toClient');
    const again = await pod.engine.peek('k');
    expect(again).toBeUndefined();
  }, 20_000);
});
