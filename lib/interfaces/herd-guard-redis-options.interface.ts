/**
 * The `redis` option of `HerdGuardModule.forRoot()`: the fields of `RedisStoreOptions` (from
 * `herd-guard/redis`), with the ioredis types left open (`object`), so that the declarations of the
 * root entry never name ioredis and an app on the memory store type-checks without it installed.
 * For ioredis's own types in your options, write them as `RedisStoreOptions`:
 * `redis: { redisOptions: { ... } } satisfies RedisStoreOptions`.
 */
export interface HerdGuardRedisOptions {
  /** `redis://[:password@]host:port[/db]` or `rediss://...`. */
  readonly url?: string;
  /** ioredis `RedisOptions` for a connection herd-guard opens (merged over its safe defaults). */
  readonly redisOptions?: object;
  /** Seed nodes of a Redis Cluster herd-guard connects to, and ioredis `ClusterOptions`. */
  readonly cluster?: {
    readonly nodes: ReadonlyArray<string | { host: string; port: number }>;
    readonly options?: object;
  };
  /** An ioredis `Redis` or `Cluster` you own (never closed by herd-guard). */
  readonly client?: object;
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
  readonly nearCache?: boolean | { readonly maxEntries?: number; readonly maxBytes?: number };
  /**
   * The server's `maxmemory-policy` (`noeviction`, `allkeys-lru`, ...), for a Redis that does not
   * let this user run `CONFIG GET` (ACLs, managed services). herd-guard reads it itself otherwise,
   * and warns (log, health) when Redis may evict the indexes invalidation depends on: anything but
   * `noeviction` with `maxmemory` set.
   */
  readonly evictionPolicy?: string;
  /**
   * Replicas that must confirm (Redis `WAIT`) each `set()`, `expire()`/`delete()` and index entry
   * before it is acknowledged, so that a failover to one of them does not lose it; fewer within
   * half of `commandTimeout` fails the call. Default 0: acknowledged by the primary alone.
   */
  readonly waitForReplicas?: number;
}
