import { Redis, type RedisOptions } from 'ioredis';

/**
 * An ioredis client whose duplicates (the Redis store's subscriber) connect to another port: a
 * store built on it sends its commands one way and gets its notifications another, so a test can
 * hold, delay or cut the two apart (each through its own {@link FaultProxy}).
 */
export class SplitConnections extends Redis {
  constructor(
    options: RedisOptions,
    private readonly subscriberPort: number,
  ) {
    super(options);
  }

  override duplicate(override?: Partial<RedisOptions>): Redis {
    return new Redis({ ...this.options, ...override, port: this.subscriberPort });
  }
}
