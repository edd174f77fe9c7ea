import type { RedisStoreOptions } from '../../lib/redis.js';
import type { RedisFixture, RedisPod } from './redis-fixture.js';
import { SplitConnections } from './split-connections.js';

/** Where a split pod sends its commands and where it gets its notifications from. */
export interface SplitPodOptions {
  readonly namespace: string;
  /** The port its commands go to (Redis itself, or a fault proxy in front of it). */
  readonly commandPort: number;
  /** The port its subscriber connects to (Redis itself, or a fault proxy in front of it). */
  readonly subscriberPort: number;
  readonly store?: Omit<RedisStoreOptions, 'client' | 'url' | 'namespace'>;
}

/**
 * A pod of the fixture's Redis whose commands and notifications take separate paths, so a test can
 * delay or cut one of them alone (each through its own FaultProxy). Closed after the test.
 */
export async function splitPod(redis: RedisFixture, options: SplitPodOptions): Promise<RedisPod> {
  const client = new SplitConnections(
    {
      host: redis.server.host,
      port: options.commandPort,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
    },
    options.subscriberPort,
  );
  client.on('error', () => undefined);
  redis.closeAfterTest({ close: async () => client.disconnect() });
  return redis.pod({ namespace: options.namespace, client, ...options.store });
}
