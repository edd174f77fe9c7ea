import type { RedisStore } from '../../lib/redis.js';
import { encodeFillMessage } from '../../lib/stores/redis/fill-message.js';
import type { RedisServer } from './redis-server.js';

/**
 * Resolves once `store` has received every notification published so far: a marker published now
 * arrives after them (one subscriber connection delivers in publish order).
 */
export async function told(server: RedisServer, store: RedisStore): Promise<void> {
  const marker = `marker-${Math.random()}`;
  const watch = store.watchFill(marker);
  const raw = server.client();
  try {
    const woken = watch.next(5_000);
    await raw.publish(store.keys.channel, encodeFillMessage('release', 1, marker));
    if (!(await woken)) throw new Error('the notification marker never arrived');
  } finally {
    watch.close();
    raw.disconnect();
  }
}
