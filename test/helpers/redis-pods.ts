import { afterAll, afterEach, beforeAll } from '@jest/globals';
import type { CachePolicy } from '../../lib/index.js';
import { type Pod, type PodOptions, startPods, stopPods } from './pods.js';
import { RedisServer, stopAllRedisServers } from './redis-server.js';

/**
 * For a test file: one `redis-server` of its own, and pods started per test (each test in a
 * namespace of its own, its pods stopped after it). Registers the hooks; call at the top level.
 */
export function redisPodsPerTest(prefix: string) {
  let server: RedisServer | undefined;
  let pods: Pod[] = [];
  let run = 0;
  beforeAll(async () => {
    server = await RedisServer.start();
  });
  afterEach(async () => {
    await stopPods(pods);
    pods = [];
  });
  afterAll(async () => {
    await stopAllRedisServers();
  });
  return {
    /** `count` pods on this file's server, stopped after the test. */
    async start(count: number, policy?: CachePolicy, store?: PodOptions['store']): Promise<Pod[]> {
      if (server === undefined) throw new Error('redisPodsPerTest: the server is not started yet');
      const started = await startPods({
        count,
        namespace: `${prefix}${(run += 1)}`,
        url: server.url,
        policy,
        store,
      });
      pods.push(...started);
      return started;
    },
    /** The pods of the running test. */
    get pods(): readonly Pod[] {
      return pods;
    },
  };
}
