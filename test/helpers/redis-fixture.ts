import { afterAll, afterEach, beforeAll } from '@jest/globals';
import { HerdEngine } from '../../lib/index.js';
import { RedisStore, type RedisStoreOptions } from '../../lib/redis.js';
import { RedisServer, stopAllRedisServers } from './redis-server.js';

interface Closable {
  close(): Promise<void>;
}

/** One pod on Redis: its own store (connections, near cache) and an engine over it. */
export interface RedisPod {
  readonly store: RedisStore;
  readonly engine: HerdEngine;
}

export interface RedisFixture {
  /** The spec file's redis-server, started before its first test. */
  readonly server: RedisServer;
  /** Closes `closable` after the current test (the last opened first); returns it. */
  closeAfterTest<T extends Closable>(closable: T): T;
  /** A pod whose store is connected, values fresh for an hour; both are closed after the test. */
  pod(options: RedisStoreOptions): Promise<RedisPod>;
}

/**
 * A redis-server for the spec file that calls this at its top level (it registers the Jest hooks),
 * and the stores, engines and clients each test opens on it, closed after the test.
 */
export function useRedisServer(): RedisFixture {
  let started: RedisServer | undefined;
  const opened: Closable[] = [];
  beforeAll(async () => {
    started = await RedisServer.start();
  });
  afterEach(async () => {
    for (const closable of opened.splice(0).reverse()) await closable.close();
  });
  afterAll(async () => {
    await stopAllRedisServers();
  });
  const closeAfterTest = <T extends Closable>(closable: T): T => {
    opened.push(closable);
    return closable;
  };
  return {
    get server(): RedisServer {
      if (started === undefined)
        throw new Error('the redis-server starts in beforeAll: use it inside a test');
      return started;
    },
    closeAfterTest,
    async pod(options: RedisStoreOptions): Promise<RedisPod> {
      const store = closeAfterTest(new RedisStore(options));
      await store.ready(10_000);
      const engine = closeAfterTest(new HerdEngine({ store, policy: { soft: '1h' } }));
      return { store, engine };
    },
  };
}
