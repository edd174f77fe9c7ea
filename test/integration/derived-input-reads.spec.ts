import { afterEach, describe, expect, it } from '@jest/globals';
import type { HerdEngine } from '../../lib/index.js';
import { deferred, sleep, until } from '../helpers/deferred.js';
import { FaultProxy, stopAllFaultProxies } from '../helpers/fault-proxy.js';
import { told } from '../helpers/notifications.js';
import { type RedisPod, useRedisServer } from '../helpers/redis-fixture.js';
import { splitPod } from '../helpers/split-pod.js';

/**
 * A value derived from other keys is built from what the store holds, not from a near copy that
 * may lag: DESIGN (Near cache) "a value derived from other keys is stored only if [...] its inputs
 * are still at the versions its loader read". The pod that loads it hears of other pods' writes
 * 400 ms late, well inside the README's bound (1 s + commandTimeout), so its copies are trusted.
 */

const NOTIFICATION_DELAY_MS = 400;
let run = 0;
const redis = useRedisServer();

afterEach(async () => {
  await stopAllFaultProxies();
});

/** Pod A (notifications 400 ms late, copies trusted) and pod B (on time), with A holding price 100. */
async function latePodAndWriter(): Promise<{ late: RedisPod; writer: RedisPod }> {
  const namespace = `derived-input${(run += 1)}`;
  const notifications = await FaultProxy.start(redis.server);
  const late = await splitPod(redis, {
    namespace,
    commandPort: redis.server.port,
    subscriberPort: notifications.port,
    store: { commandTimeout: 500 },
  });
  const writer = await redis.pod({ namespace, url: redis.server.url, commandTimeout: 500 });
  await late.engine.getOrLoad('price', async () => 100);
  notifications.delay(NOTIFICATION_DELAY_MS, 'toClient');
  // Everything published before the delay began has arrived; from now on A hears 400 ms late.
  await told(redis.server, writer.store);
  await until(() => late.store.nearCache.trusted, 5_000, 'the late pod to trust its copies');
  return { late, writer };
}

function page(engine: HerdEngine, read: (engine: HerdEngine) => Promise<unknown>) {
  return engine.read('page', async () => `price=${String(await read(engine))}`);
}

const readers: ReadonlyArray<[string, (engine: HerdEngine) => Promise<unknown>]> = [
  ['getOrLoad()', (engine) => engine.getOrLoad('price', async () => 'reloaded')],
  ['peek()', async (engine) => (await engine.peek('price'))?.value],
];

describe('a derived value loaded on a pod whose notifications are late', () => {
  it.each(readers)(
    'reads its input with %s at the store, so it is never stored from a price another pod already replaced',
    async (_label, read) => {
      const { late, writer } = await latePodAndWriter();
      await writer.engine.set('price', 200);
      // A still trusts its copy of price (the notification of the set is on its way).
      expect(late.store.nearCache.trusted).toBe(true);

      const loaded = await page(late.engine, read);
      // What every pod reads of the page is built from the price set before it was loaded.
      await expect(page(writer.engine, read)).resolves.toMatchObject({
        value: 'price=200',
        path: 'fresh',
      });
      expect(loaded.value).toBe('price=200');
    },
  );
});

describe('an input a derived load waits for, on a pod whose notifications are late', () => {
  it('does not take, as the input, a copy that a late notification brings of a value the store already replaced', async () => {
    const { late, writer } = await latePodAndWriter();
    // Another pod sets price 100 (the late pod hears of it 400 ms from now), and 100 ms later
    // deletes it and starts loading it again, its loader held.
    await writer.engine.set('price', 100);
    await sleep(100);
    await writer.engine.delete('price');
    const reload = deferred<number>();
    let reloading = false;
    const reloaded = writer.engine.read('price', () => {
      reloading = true;
      return reload.promise;
    });
    await until(() => reloading, 5_000, 'the other pod to reload price');

    // The late pod loads the page: its input price is gone from the store and leased elsewhere, so
    // the load waits for it; the notification of the set (price 100) reaches it meanwhile.
    let waiting = false;
    late.engine.onEvent((event) => {
      if (event.type === 'wait' && event.key === 'price') waiting = true;
    });
    const loaded = page(late.engine, (engine) => engine.getOrLoad('price', async () => 'unused'));
    await until(() => waiting, 5_000, 'the page load to wait for price');
    await told(redis.server, late.store);
    reload.resolve(300);
    await Promise.all([loaded, reloaded]);

    // Price 100 was replaced before the page load began: no pod may get a page built on it as fresh.
    await expect(page(writer.engine, async () => 'unused')).resolves.not.toMatchObject({
      value: 'price=100',
      path: 'fresh',
    });
  });
});
