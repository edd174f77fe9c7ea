import { describe, expect, it } from '@jest/globals';
import { RedisKeys, type RedisStoreOptions } from '../../lib/redis.js';
import { encodeFillMessage } from '../../lib/stores/redis/fill-message.js';
import { told } from '../helpers/notifications.js';
import { useRedisServer } from '../helpers/redis-fixture.js';

/*
 * Apps that share one redis-server but not their data (another database, another ioredis
 * keyPrefix) must not share notifications either: Redis pub/sub ignores the database and ioredis
 * does not prefix channels.
 */
const redis = useRedisServer();

/** Two apps of the default namespace, each on its own connection settings. */
async function apps(first: RedisStoreOptions, second: RedisStoreOptions) {
  return [await redis.pod(first), await redis.pod(second)] as const;
}

describe.each([
  ['databases 1 and 2', (url: string) => [{ url: `${url}/1` }, { url: `${url}/2` }]],
  [
    'keyPrefix a: and b:',
    (url: string) => [
      { url, redisOptions: { keyPrefix: 'a:' } },
      { url, redisOptions: { keyPrefix: 'b:' } },
    ],
  ],
] as const)('two apps on %s of one Redis', (_name, settings) => {
  it("never answer each other's values: app 2's set() does not reach app 1", async () => {
    const [first, second] = settings(redis.server.url);
    const [app1, app2] = await apps(first, second);
    await expect(app1.engine.getOrLoad('price', () => 'app 1 value')).resolves.toBe('app 1 value');
    await app2.engine.set('price', 'app 2 value');
    await told(redis.server, app1.store);
    await expect(app1.engine.read('price', () => 'reloaded')).resolves.toMatchObject({
      value: 'app 1 value',
      path: 'fresh',
    });
    await expect(app2.engine.read('price', () => 'reloaded')).resolves.toMatchObject({
      value: 'app 2 value',
      path: 'fresh',
    });
  });

  it("are not invalidated by each other: app 2's expire() leaves app 1's value fresh", async () => {
    const [first, second] = settings(redis.server.url);
    const [app1, app2] = await apps(first, second);
    await app1.engine.getOrLoad('stock', () => 1);
    await app2.engine.getOrLoad('stock', () => 2);
    await app2.engine.expire('stock');
    await told(redis.server, app1.store);
    await expect(app1.engine.read('stock', () => 10)).resolves.toMatchObject({
      value: 1,
      path: 'fresh',
    });
  });
});

describe('the notification channel', () => {
  it('stays `<namespace>:fill` on database 0 without a keyPrefix (as the previous release)', () => {
    expect(new RedisKeys('hg').channel).toBe('hg:fill');
    expect(new RedisKeys('shop', { db: 0, keyPrefix: '' }).channel).toBe('shop:fill');
  });

  it('names the database and the keyPrefix otherwise', () => {
    expect(new RedisKeys('hg', { db: 1 }).channel).toBe('hg:fill:db1');
    expect(new RedisKeys('hg', { keyPrefix: 'a:' }).channel).toBe('a:hg:fill');
    expect(new RedisKeys('hg', { db: 2, keyPrefix: 'b:' }).channel).toBe('b:hg:fill:db2');
  });

  it('of a store follows its client: the URL database, a client of yours, keyPrefix', async () => {
    const url = redis.server.url;
    const onDb3 = await redis.pod({ url: `${url}/3` });
    expect(onDb3.store.keys.channel).toBe('hg:fill:db3');
    const own = redis.server.client({ db: 4, keyPrefix: 'mine:' });
    redis.closeAfterTest({ close: async () => void own.disconnect() });
    const passed = await redis.pod({ client: own, namespace: 'ns' });
    expect(passed.store.keys.channel).toBe('mine:ns:fill:db4');
  });

  it('ignores what does not belong: messages of no known format, heartbeats of other stores', async () => {
    const app = await redis.pod({ url: redis.server.url, namespace: 'stray' });
    await app.engine.getOrLoad('k', () => 'kept');
    const raw = redis.server.client();
    redis.closeAfterTest({ close: async () => void raw.disconnect() });
    const strays = [
      'hello',
      'h:someone-else:1',
      'x:1:1\nk',
      encodeFillMessage('write', 1, 'k').slice(0, 3),
    ];
    for (const stray of strays) await raw.publish(app.store.keys.channel, stray);
    await told(redis.server, app.store);
    await expect(app.engine.read('k', () => 'reloaded')).resolves.toMatchObject({
      value: 'kept',
      path: 'fresh',
    });
    expect(app.store.health().status).toBe('up');
  });
});
