/**
 * Peer (c): @nestjs/cache-manager with a Redis store, set up the way the NestJS docs show it.
 *
 * Docs followed:
 * - NestJS caching, "Using alternative Cache stores": `CacheModule.registerAsync({ useFactory })`
 *   returning `stores: [..., new KeyvRedis('redis://...')]`; the `Cache` is injected with the
 *   `CACHE_MANAGER` token. https://docs.nestjs.com/techniques/caching
 * - cache-manager v7 README (options `ttl`/`refreshThreshold`, `wrap`, `disconnect`):
 *   https://github.com/jaredwray/cacheable/tree/main/packages/cache-manager#readme
 *   (also https://www.npmjs.com/package/cache-manager)
 * - @keyv/redis README (`KeyvRedis`, namespaces, `disconnect` sends QUIT):
 *   https://github.com/jaredwray/keyv/tree/main/packages/redis#readme
 *
 * What the pod does:
 * - Each pod is its own Nest application context (`NestFactory.createApplicationContext`) whose root
 *   module is `CacheModule.registerAsync(...)`, so the `Cache` comes out of the real Nest provider
 *   (@nestjs/cache-manager 12 wraps a bare `KeyvRedis` adapter in `new Keyv({ store, ttl, namespace })`
 *   and calls cache-manager's `createCache`). One node-redis (@redis/client) connection per pod.
 * - Reads go through `cache.wrap(key, loader, options)`. In cache-manager v7, `wrap` coalesces
 *   concurrent calls for the same key through an in-process promise map keyed by the cache's random
 *   `cacheId` (`coalesceAsync` from @cacheable/utils), so it is a per-pod singleflight; there is no
 *   cross-pod coordination (see jaredwray/cacheable#1201). Pods must therefore keep distinct cacheIds
 *   (the default, random) or they would coalesce with each other inside this one benchmark process.
 * - TTL, mode `refresh` (default): `{ ttl: hardMs, refreshThreshold: hardMs - softMs }`. wrap returns
 *   the cached value and, when its remaining TTL is below the threshold (value older than softMs),
 *   re-runs the loader in the background (coalesced per pod) and rewrites the entry.
 *   Mode `plain`: `{ ttl: softMs }`, no background refresh.
 * - Optional `memoryL1`: puts an in-memory Keyv first in `stores`, like the docs' two-store example.
 *   The docs use `KeyvCacheableMemory` from the `cacheable` package, which is not a dependency here,
 *   so this variant uses Keyv's built-in Map store with a default TTL of `l1TtlMs`. Off by default:
 *   an unsynchronised per-pod L1 changes what "fresh" means, and the brief asks for a Redis store.
 * - close(): `app.close()` runs the provider's `onModuleDestroy`, which disconnects every store
 *   (node-redis QUIT); nothing else stays open.
 */
import { CACHE_MANAGER, CacheModule } from '@nestjs/cache-manager';
import { NestFactory } from '@nestjs/core';
import KeyvRedis from '@keyv/redis';
import { type Cache } from 'cache-manager';
import { Keyv } from 'keyv';

import { type PeerFactory, type PeerLoader, type PeerPod, type PeerTtl } from './peer.js';

export interface CacheManagerPeerOptions {
  /** `refresh` (default): ttl = hardMs + refreshThreshold = hardMs - softMs. `plain`: ttl = softMs. */
  mode?: 'refresh' | 'plain';
  /** Adds an in-memory Keyv store in front of Redis (see the file comment). Default false. */
  memoryL1?: boolean;
  /** Default TTL of the L1 store when `memoryL1` is on. Default 60_000 ms (the docs' example value). */
  l1TtlMs?: number;
}

class CacheManagerPod implements PeerPod {
  constructor(
    private readonly close_: () => Promise<void>,
    private readonly cache: Cache,
    private readonly mode: 'refresh' | 'plain',
  ) {}

  get(key: string, loader: PeerLoader, ttl: PeerTtl): Promise<string> {
    if (this.mode === 'plain' || ttl.hardMs <= ttl.softMs) {
      return this.cache.wrap(key, loader, { ttl: ttl.softMs });
    }
    return this.cache.wrap(key, loader, {
      ttl: ttl.hardMs,
      refreshThreshold: ttl.hardMs - ttl.softMs,
    });
  }

  close(): Promise<void> {
    return this.close_();
  }
}

export function createCacheManagerPeer(options: CacheManagerPeerOptions = {}): PeerFactory {
  const mode = options.mode ?? 'refresh';
  const memoryL1 = options.memoryL1 ?? false;
  const l1TtlMs = options.l1TtlMs ?? 60_000;
  const suffix = `${mode === 'plain' ? '-plain' : ''}${memoryL1 ? '+l1' : ''}`;
  return {
    name: `cache-manager${suffix}`,
    description:
      `@nestjs/cache-manager CacheModule, stores [${memoryL1 ? 'Keyv(memory), ' : ''}KeyvRedis], ` +
      (mode === 'refresh'
        ? 'wrap(key, fn, { ttl: hardMs, refreshThreshold: hardMs - softMs })'
        : 'wrap(key, fn, { ttl: softMs })'),
    async createPod(redisUrl, namespace) {
      const app = await NestFactory.createApplicationContext(
        CacheModule.registerAsync({
          useFactory: () => ({
            // Applied by @nestjs/cache-manager to the Keyv it wraps around the bare KeyvRedis adapter.
            namespace,
            stores: [...(memoryL1 ? [new Keyv({ ttl: l1TtlMs })] : []), new KeyvRedis(redisUrl)],
          }),
        }),
        { logger: false },
      );
      const cache = app.get<Cache>(CACHE_MANAGER);
      // Connect now (node-redis connects on first use) so that connecting is not part of a herd.
      await cache.get(`__warmup__`);
      return new CacheManagerPod(() => app.close(), cache, mode);
    },
  };
}

export const cacheManagerPeer: PeerFactory = createCacheManagerPeer();
