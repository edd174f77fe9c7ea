/**
 * Peer (a): no stampede protection at all.
 *
 * Plain read-through cache on Redis, as most hand-written code does it:
 *   GET key -> hit: return it; miss: call the loader, then SET key value PX ttl.
 * Every concurrent caller that misses calls the loader, in every pod.
 *
 * TTL: Redis TTL = `ttl.softMs` (no stale serving; see peer.ts).
 * Client: ioredis 5 (`import { Redis } from 'ioredis'`, the named export types correctly under
 * nodenext). One connection per pod.
 */
import { Redis } from 'ioredis';

import {
  namespacedKey,
  type PeerFactory,
  type PeerLoader,
  type PeerPod,
  type PeerTtl,
} from './peer.js';

export class NoProtectionPod implements PeerPod {
  constructor(
    protected readonly redis: Redis,
    protected readonly namespace: string,
  ) {}

  get(key: string, loader: PeerLoader, ttl: PeerTtl): Promise<string> {
    return this.readThrough(key, loader, ttl);
  }

  protected async readThrough(key: string, loader: PeerLoader, ttl: PeerTtl): Promise<string> {
    const redisKey = namespacedKey(this.namespace, key);
    const cached = await this.redis.get(redisKey);
    if (cached !== null) return cached;
    const value = await loader();
    await this.redis.set(redisKey, value, 'PX', Math.max(1, Math.round(ttl.softMs)));
    return value;
  }

  async close(): Promise<void> {
    await this.redis.quit();
  }
}

/** Opens one ioredis connection and waits until it answers, so connecting is not part of a herd. */
export async function connectIoRedis(redisUrl: string): Promise<Redis> {
  const redis = new Redis(redisUrl, { lazyConnect: true });
  await redis.connect();
  await redis.ping();
  return redis;
}

export const noProtectionPeer: PeerFactory = {
  name: 'no-protection',
  description: 'Redis read-through (GET; on miss loader + SET PX softMs), no coalescing',
  async createPod(redisUrl, namespace) {
    return new NoProtectionPod(await connectIoRedis(redisUrl), namespace);
  },
};
