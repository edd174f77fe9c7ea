// herd-guard/redis: the Redis store, on ioredis (an optional peer). The root entry never loads this
// file statically, so an app on the memory store runs and type-checks without ioredis installed;
// `HerdGuardModule.forRoot({ redis })` imports it when the module starts.
export { RedisStore } from './stores/redis/redis.store.js';
export type { EvictionPolicy, RedisStoreOptions } from './stores/redis/redis-store.options.js';
export { RedisKeys } from './stores/redis/redis-keys.js';
export type { RedisKeyLayout } from './stores/redis/redis-keys.js';
export type { NearCacheReport } from './stores/redis/near-cache.js';
