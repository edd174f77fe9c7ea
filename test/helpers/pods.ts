import { Cluster, type Redis } from 'ioredis';
import { type CachePolicy, HerdEngine } from '../../lib/index.js';
import { RedisStore, type RedisStoreOptions } from '../../lib/redis.js';

/** One simulated pod: its own Redis connections, its own memory, its own engine. */
export interface Pod {
  readonly store: RedisStore;
  readonly engine: HerdEngine;
}

export interface PodOptions {
  readonly count: number;
  readonly namespace: string;
  readonly policy?: CachePolicy;
  /** Where to connect: a URL, or Cluster seed nodes. */
  readonly url?: string;
  readonly clusterNodes?: ReadonlyArray<{ host: string; port: number }>;
  readonly store?: Omit<RedisStoreOptions, 'url' | 'cluster' | 'client' | 'namespace'>;
}

export async function startPods(options: PodOptions): Promise<Pod[]> {
  const pods = Array.from({ length: options.count }, () => {
    const connection: RedisStoreOptions =
      options.clusterNodes === undefined
        ? { url: options.url }
        : { cluster: { nodes: options.clusterNodes } };
    const store = new RedisStore({ ...connection, ...options.store, namespace: options.namespace });
    return { store, engine: new HerdEngine({ store, policy: options.policy }) };
  });
  const ready = await Promise.all(pods.map((pod) => pod.store.ready(10_000)));
  if (!ready.every(Boolean)) throw new Error('a pod did not connect to Redis');
  return pods;
}

export async function stopPods(pods: readonly Pod[]): Promise<void> {
  await Promise.all(pods.map((pod) => pod.engine.close()));
  await Promise.all(pods.map((pod) => pod.store.close()));
}

/** A loader shared by all pods of a test, counting its calls. */
export function countedLoader<T>(value: (call: number) => T, delayMs = 0) {
  const loader = async (): Promise<T> => {
    loader.calls += 1;
    const call = loader.calls;
    if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
    return value(call);
  };
  loader.calls = 0;
  return loader;
}

export type AnyRedis = Redis | Cluster;
export { Cluster };
