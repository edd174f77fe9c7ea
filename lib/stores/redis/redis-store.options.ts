import type { Cluster, ClusterOptions, Redis, RedisOptions } from 'ioredis';
import type { NearCacheOptions } from './near-cache.js';

/** Redis's `maxmemory-policy` values. */
export const EVICTION_POLICIES = [
  'noeviction',
  'allkeys-lru',
  'allkeys-lfu',
  'allkeys-random',
  'volatile-lru',
  'volatile-lfu',
  'volatile-random',
  'volatile-ttl',
] as const;

export type EvictionPolicy = (typeof EVICTION_POLICIES)[number];

/**
 * How to reach Redis: a URL, ioredis options, or a client you own (a `Redis` or a `Cluster`). A
 * client you pass in is never closed by herd-guard; connections herd-guard opens are closed on
 * shutdown.
 */
export interface RedisStoreOptions {
  /** `redis://[:password@]host:port[/db]` or `rediss://...`. */
  readonly url?: string;
  /** ioredis options for a connection herd-guard opens (merged over its safe defaults). */
  readonly redisOptions?: RedisOptions;
  /** Seed nodes of a Redis Cluster herd-guard connects to. */
  readonly cluster?: {
    readonly nodes: ReadonlyArray<string | { host: string; port: number }>;
    readonly options?: ClusterOptions;
  };
  /**
   * An existing client (yours to close). Fill notifications use a duplicate of it, which herd-guard
   * closes.
   */
  readonly client?: Redis | Cluster;
  /** Prefix of every key, so several apps can share one Redis. Default `hg`. */
  readonly namespace?: string;
  /** A command that takes longer fails (and counts towards the breaker). Default `'500ms'`. */
  readonly commandTimeout?: number | string;
  /** Consecutive failures that open the breaker; while open, Redis is not waited on. Default 5. */
  readonly breakerThreshold?: number;
  /** How long the breaker stays open before one probe command is let through. Default `'2s'`. */
  readonly breakerCooldown?: number | string;
  /**
   * The near cache: copies of envelopes in this process, kept coherent by the notifications, that
   * answer hits with no round trip while the subscription is known to be live, and (as stale) while
   * Redis is unreachable. `false` answers every hit from Redis (copies are then only the outage
   * fallback). Default `true`: `{ maxEntries: 10_000, maxBytes: 64 MiB }`.
   */
  readonly nearCache?: boolean | NearCacheOptions;
  /**
   * The server's `maxmemory-policy`, for a Redis that does not let this user run `CONFIG GET`
   * (ACLs, managed services). herd-guard reads it itself otherwise, and warns (log, health) when
   * Redis may evict the indexes invalidation depends on: anything but `noeviction` with
   * `maxmemory` set.
   */
  readonly evictionPolicy?: EvictionPolicy;
  /**
   * Replicas that must confirm (Redis `WAIT`) each `set()`, `expire()`/`delete()` and index entry
   * before it is acknowledged, so that a failover to one of them does not lose it; fewer within
   * half of `commandTimeout` fails the call. Default 0: acknowledged by the primary alone (Redis
   * replicates asynchronously; the last writes before a failover may be lost). See docs/redis.md.
   */
  readonly waitForReplicas?: number;
}
