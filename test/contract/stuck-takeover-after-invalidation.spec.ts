import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Entry, HerdStore } from '../../lib/index.js';
import { MemoryStore } from '../../lib/index.js';
import { RedisStore } from '../../lib/redis.js';
import { told } from '../helpers/notifications.js';
import { RedisServer, stopAllRedisServers } from '../helpers/redis-server.js';

/*
 * A follower decides a lease holder is stuck from the version it saw, then asks for a takeover from
 * that version. If an invalidation (set, delete, expire, clear) lands between the two, the holder's
 * lease is revoked and the key has moved on: the takeover finds the lease free and gets a plain
 * grant. The holder's load started before the invalidation, so its late value must stay fenced
 * (docs/invalidation.md), whatever the new lease holder's token looks like.
 */
let server: RedisServer;
let run = 0;

beforeAll(async () => {
  server = await RedisServer.start();
});

afterAll(async () => {
  await stopAllRedisServers();
});

function entry<T>(value: T, version = 0): Entry<T> {
  const now = Date.now();
  return {
    value,
    version,
    createdAt: now,
    softExpireAt: now + 60_000,
    hardExpireAt: now + 600_000,
    loadMs: 3,
  };
}

interface Pair {
  readonly holder: HerdStore;
  readonly follower: HerdStore;
  read(key: string): ReturnType<HerdStore['get']>;
  close(): Promise<void>;
}

const fixtures: Record<string, () => Promise<Pair>> = {
  memory: async () => {
    const store = new MemoryStore();
    return {
      holder: store,
      follower: store,
      read: async (key) => store.get(key),
      close: () => store.close(),
    };
  },
  redis: async () => {
    const namespace = `stuck-inv${(run += 1)}`;
    const holder = new RedisStore({ url: server.url, namespace });
    const follower = new RedisStore({ url: server.url, namespace });
    await Promise.all([holder.ready(), follower.ready()]);
    return {
      holder,
      follower,
      read: async (key) => {
        await told(server, follower);
        return follower.get(key);
      },
      close: async () => {
        await Promise.all([holder.close(), follower.close()]);
      },
    };
  },
};

type Invalidation = (store: HerdStore, key: string) => Promise<unknown>;
const invalidations: Array<[string, Invalidation, string | undefined]> = [
  ['set()', (store, key) => store.set(key, entry('written after')), 'written after'],
  ['delete', (store, key) => store.invalidate(key, 'delete'), undefined],
  ['clear(delete)', (store) => store.clear!('delete'), undefined],
];

describe.each(Object.keys(fixtures))(
  '%s store: a stuck takeover asked after an invalidation',
  (name) => {
    it.each(invalidations)(
      "keeps the holder's late value fenced when %s landed before the takeover",
      async (_label, invalidate, expected) => {
        const pair = await fixtures[name]!();
        try {
          const held = await pair.holder.acquireLease('k', 60_000);
          expect(held.lease).toBeDefined();
          // The follower saw the holder at this version and, later, deems it stuck...
          const seen = held.current.version;
          // ...but in between the key was invalidated (the holder's lease is revoked).
          await invalidate(pair.follower, 'k');
          const taken = await pair.follower.acquireLease('k', 5_000, {
            takeoverFrom: seen,
            takeover: 'stuck',
          });
          // Granted, or refused as no longer a takeover: then the follower asks again, as a fill
          // does. Either way it holds the lease while the holder's late fill comes.
          const lease = taken.lease ?? (await pair.follower.acquireLease('k', 5_000)).lease;
          expect(lease).toBeDefined();
          // The holder's load, started before the invalidation, ends now.
          await expect(
            pair.holder.fill('k', entry('loaded before', held.lease!.fence), held.lease),
          ).resolves.toBe(false);
          const now = await pair.read('k');
          expect((now.entry as Entry<string> | undefined)?.value).toBe(expected);
        } finally {
          await pair.close();
        }
      },
    );
  },
);
