import { afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import type { Redis } from 'ioredis';
import type { StoreSnapshot } from '../../lib/index.js';
import { sleep } from '../helpers/deferred.js';
import { FaultProxy, stopAllFaultProxies } from '../helpers/fault-proxy.js';
import { type RedisPod, useRedisServer } from '../helpers/redis-fixture.js';
import { SplitConnections } from '../helpers/split-connections.js';

/**
 * Without the near cache every read of a key is an MGET. Readers of a key share MGETs: those in the
 * tick that sent one take its answer; those that come while it is out share the next one, sent when
 * it is answered (an answer Redis may have read before they came, before an invalidation that
 * resolved meanwhile, is never theirs).
 */

let admin: Redis;
let run = 0;
const redis = useRedisServer();

beforeAll(() => {
  admin = redis.server.client(); // closed with the server
});

afterEach(async () => {
  await stopAllFaultProxies();
});

function pod(
  connection: { url: string } | { client: Redis },
  namespace: string,
): Promise<RedisPod> {
  return redis.pod({ ...connection, namespace, nearCache: false, commandTimeout: '2s' });
}

async function mgetCalls(): Promise<number> {
  const stats = await admin.info('commandstats');
  return Number(/cmdstat_mget:calls=(\d+)/.exec(stats)?.[1] ?? 0);
}

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

const valueOf = (snapshot: StoreSnapshot): unknown =>
  (snapshot.entry as { value?: unknown } | undefined)?.value;

describe('Redis store without the near cache: reads of a key', () => {
  it('cost at most one MGET per round trip: readers that come while one is out share the next', async () => {
    const namespace = `read-sharing${(run += 1)}`;
    const proxy = await FaultProxy.start(redis.server);
    const slow = await pod({ url: proxy.url }, namespace);
    await slow.engine.set('k', 'v1');
    proxy.delay(300, 'toClient');
    const before = await mgetCalls();
    const reads: Array<Promise<StoreSnapshot>> = [];
    // One reader per turn of the event loop, as requests arrive, for longer than a round trip takes to start.
    for (let i = 0; i < 20; i++) {
      reads.push(Promise.resolve(slow.store.get('k')));
      await nextTurn();
    }
    const answers = await Promise.all(reads);
    expect(answers.map(valueOf)).toEqual(Array.from({ length: 20 }, () => 'v1'));
    // The first MGET, then one for all who came while it was out.
    expect((await mgetCalls()) - before).toBe(2);
  });

  it('never answer a reader with an MGET Redis ran before an invalidation that resolved before the reader came', async () => {
    const namespace = `read-sharing${(run += 1)}`;
    const commands = await FaultProxy.start(redis.server);
    const notifications = await FaultProxy.start(redis.server);
    const client = new SplitConnections(
      {
        host: redis.server.host,
        port: commands.port,
        enableOfflineQueue: false,
        maxRetriesPerRequest: 0,
      },
      notifications.port,
    );
    client.on('error', () => undefined);
    redis.closeAfterTest({ close: async () => client.disconnect() });
    const slow = await pod({ client }, namespace);
    const other = await pod({ url: redis.server.url }, namespace);
    await other.engine.set('k', 'v1');
    // Its notification reaches the pod (through the proxy, in this process) first.
    await sleep(50);
    // The pod hears of no change (its notifications are held): only how it shares reads can keep it right.
    notifications.pause('toClient');
    // Requests reach Redis at once; answers come back 300 ms later.
    commands.delay(300, 'toClient');
    const mgets = await mgetCalls();
    const early = Promise.resolve(slow.store.get('k'));
    // Redis has run the MGET (the proxy, in this process, forwards it within a few turns)...
    for (let attempt = 0; attempt < 200 && (await mgetCalls()) === mgets; attempt += 1)
      await sleep(5);
    expect(await mgetCalls()).toBe(mgets + 1);
    // ...and only then does the other pod's write run and resolve, while the answer is on its way back.
    await other.engine.set('k', 'v2');
    const late = Promise.resolve(slow.store.get('k'));
    expect(valueOf(await early)).toBe('v1');
    expect(valueOf(await late)).toBe('v2');
  });
});
