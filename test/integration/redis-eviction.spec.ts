import { afterAll, afterEach, describe, expect, it } from '@jest/globals';
import { type LoggerService, Module } from '@nestjs/common';
import {
  HerdEngine,
  HerdGuardHealthIndicator,
  HerdGuardModule,
  type HerdGuardModuleOptions,
} from '../../lib/index.js';
import { RedisStore, type RedisStoreOptions } from '../../lib/redis.js';
import { eventually } from '../helpers/deferred.js';
import { startContext } from '../helpers/nest-app.js';
import { RedisServer, stopAllRedisServers } from '../helpers/redis-server.js';

/*
 * Tag and dependents invalidations read an index (a sorted set) written when a value is stored and
 * never read on the hot path: under an eviction policy it is the first key to go, and the values
 * it listed then escape invalidation. herd-guard cannot tell an evicted index from an empty one,
 * so it finds out the policy (CONFIG GET) and says so.
 */

const LRU = ['--maxmemory', '4mb', '--maxmemory-policy', 'allkeys-lru'];
const opened: Array<{ close(): Promise<void> }> = [];

afterEach(async () => {
  for (const closable of opened.splice(0).reverse()) await closable.close();
});

afterAll(async () => {
  await stopAllRedisServers();
});

async function pod(options: RedisStoreOptions) {
  const store = new RedisStore({ namespace: 'evict', ...options });
  const engine = new HerdEngine({ store, policy: { soft: '1h' } });
  opened.push(store, engine);
  expect(await store.ready(10_000)).toBe(true);
  return { store, engine };
}

/** Log lines at warn and error level, as the module's logger receives them. */
function recordingLogger() {
  const lines: unknown[] = [];
  const logger: LoggerService = {
    log: () => undefined,
    warn: (line: unknown) => lines.push(line),
    error: (line: unknown) => lines.push(line),
  };
  return { logger, lines };
}

describe('a Redis whose eviction policy can evict indexes (maxmemory, allkeys-lru)', () => {
  it('evicts a tag index before the values it lists, and expireTag() misses them: herd-guard says so', async () => {
    const server = await RedisServer.start({ args: LRU });
    const { store, engine } = await pod({ url: server.url, nearCache: false });
    const raw = server.client();
    opened.push({ close: async () => void raw.disconnect() });
    await engine.getOrLoad('product:1', () => 'price 100', { tags: ['products'] });
    const index = store.keys.tag('products');
    const value = store.keys.for('product:1').value;
    expect(await raw.exists(index, value)).toBe(2);

    // As in production after a while: the index not read since it was written (an hour), other
    // data idle for minutes, the value read all the time. (LRU counts idle time in whole seconds:
    // RESTORE ... IDLETIME sets it without waiting.)
    await raw.restore(
      index,
      await raw.pttl(index),
      (await raw.dumpBuffer(index))!,
      'REPLACE',
      'IDLETIME',
      3_600,
    );
    await raw.set('template', 'x'.repeat(10_000));
    const other = (await raw.dumpBuffer('template'))!;
    await raw.del('template');
    // KEYS, unlike EXISTS, does not count as an access to the index.
    const indexKept = async () => (await raw.keys(index)).length === 1;
    const others: string[] = [];
    while ((await indexKept()) && others.length < 8_000) {
      const pipeline = raw.pipeline();
      for (let i = 0; i < 20; i++) {
        others.push(`other:${others.length}`);
        pipeline.restore(others.at(-1)!, 0, other, 'IDLETIME', 600);
      }
      await pipeline.exec();
      await engine.read('product:1', () => 'reloaded');
    }
    // Memory back under the limit: nothing more is evicted while the test looks.
    await raw.unlink(...others);
    expect(await indexKept()).toBe(false);
    expect(await raw.exists(value)).toBe(1);
    await expect(engine.expireTag('products')).resolves.toBe(0);
    await expect(engine.read('product:1', () => 'reloaded')).resolves.toMatchObject({
      value: 'price 100',
      path: 'fresh',
    });

    expect(store.health()).toMatchObject({
      status: 'up',
      warnings: [expect.stringMatching(/maxmemory-policy allkeys-lru.*noeviction/s)],
    });
  });

  it('is reported at start by the module: a log line, and the health details', async () => {
    const server = await RedisServer.start({ args: LRU });
    const { logger, lines } = recordingLogger();
    const options: HerdGuardModuleOptions = { redis: server.url, logging: logger };
    @Module({ imports: [HerdGuardModule.forRoot(options)] })
    class AppModule {}
    const context = await startContext(AppModule);
    opened.push(context);
    expect(lines).toContainEqual(
      expect.objectContaining({
        warning: expect.stringMatching(/maxmemory-policy allkeys-lru.*noeviction/s),
      }),
    );
    const health = await context.get(HerdGuardHealthIndicator).isHealthy('cache');
    expect(health.cache).toMatchObject({
      status: 'up',
      warnings: [expect.stringMatching(/allkeys-lru/)],
    });
  });

  it('is checked again after a reconnect (the node may have changed)', async () => {
    const server = await RedisServer.start();
    const { store } = await pod({ url: server.url });
    expect(store.health().warnings).toBeUndefined();
    await server.command('CONFIG', 'SET', 'maxmemory', '100mb');
    await server.command('CONFIG', 'SET', 'maxmemory-policy', 'volatile-lru');
    await server.command('CLIENT', 'KILL', 'TYPE', 'normal');
    await eventually(
      async () => /volatile-lru/.test(store.health().warnings?.[0] ?? ''),
      5_000,
      'the warning after the reconnect',
    );
  });
});

describe('a Redis that cannot evict indexes', () => {
  it.each([
    ['without maxmemory', []],
    ['with maxmemory and noeviction', ['--maxmemory', '100mb', '--maxmemory-policy', 'noeviction']],
  ])('%s: no warning', async (_name, args) => {
    const server = await RedisServer.start({ args });
    const { store } = await pod({ url: server.url });
    expect(store.health()).toEqual({ status: 'up', breaker: 'closed' });
  });
});

describe('a Redis user that may not run CONFIG (ACL)', () => {
  it('is told the policy is unknown, and how to fix it', async () => {
    const server = await RedisServer.start({ args: LRU });
    await server.command('ACL', 'SETUSER', 'app', 'on', '>secret', '~*', '&*', '+@all', '-config');
    const { store } = await pod({ url: `redis://app:secret@${server.host}:${server.port}` });
    expect(store.health()).toMatchObject({
      status: 'up',
      warnings: [expect.stringMatching(/unknown.*\+config\|get.*evictionPolicy/s)],
    });
  });

  it('declares the policy with redis.evictionPolicy: no CONFIG call, and a warning only if unsafe', async () => {
    const server = await RedisServer.start();
    await server.command('ACL', 'SETUSER', 'app', 'on', '>secret', '~*', '&*', '+@all', '-config');
    await server.resetStats();
    const url = `redis://app:secret@${server.host}:${server.port}`;
    const safe = await pod({ url, evictionPolicy: 'noeviction' });
    expect(safe.store.health()).toEqual({ status: 'up', breaker: 'closed' });
    const unsafe = await pod({ url, evictionPolicy: 'allkeys-lfu' });
    expect(unsafe.store.health().warnings).toEqual([expect.stringMatching(/allkeys-lfu/)]);
    expect((await server.commandStats())['config|get']).toBeUndefined();
  });
});
