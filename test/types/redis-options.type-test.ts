/**
 * Checked by `npm run typecheck` (never run): the root entry's `HerdGuardRedisOptions`, which may
 * not name ioredis, stays in step with `RedisStoreOptions` from 'herd-guard/redis'. When a field is
 * added to one, this file stops compiling until it is added to the other.
 */
import type { HerdGuardModuleOptions, HerdGuardRedisOptions } from '../../lib/index.js';
import type { RedisStoreOptions } from '../../lib/redis.js';

type SameKeys<A, B> = [Exclude<keyof A, keyof B>, Exclude<keyof B, keyof A>] extends [never, never]
  ? true
  : false;

/** Both types have the same fields. */
export const sameFields: SameKeys<RedisStoreOptions, HerdGuardRedisOptions> = true;

/** Any `RedisStoreOptions` (ioredis types and all) is accepted by `forRoot({ redis })`. */
export function acceptsStoreOptions(options: RedisStoreOptions): HerdGuardModuleOptions {
  return { redis: options };
}
