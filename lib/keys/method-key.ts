import { KeySerializationError } from '../errors/key-serialization.error.js';
import { stableSerialize } from './stable-serialize.js';

/**
 * The cache key `@Cached` builds for a call without a `key` function: `Class.method(arg0,arg1)`,
 * each argument written by {@link stableSerialize}. Argument order matters; trailing `undefined`
 * arguments are dropped, so `find(1)` and `find(1, undefined)` share an entry (as default
 * parameters treat them alike). Use it to invalidate: `herd.expire(methodCacheKey('Users.find',
 * [42]))`.
 */
export function methodCacheKey(target: string, args: readonly unknown[]): string {
  let count = args.length;
  while (count > 0 && args[count - 1] === undefined) count -= 1;
  const parts: string[] = [];
  for (let index = 0; index < count; index += 1) {
    try {
      parts.push(stableSerialize(args[index], `args[${index}]`));
    } catch (error) {
      if (error instanceof KeySerializationError)
        throw new KeySerializationError(error.path, error.reason, target);
      throw error;
    }
  }
  return `${target}(${parts.join(',')})`;
}
