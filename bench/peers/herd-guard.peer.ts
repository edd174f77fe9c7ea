/**
 * herd-guard itself, behind the same PeerPod interface as the peers it is compared with.
 *
 * One pod = one `HerdEngine` over its own store, used through the public API (`getOrLoad`, and
 * `read`/`set`/`expire` for the invalidation scenario):
 * - `herd-guard-redis`: a `RedisStore` per pod (its own command and subscriber connections), all
 *   pods of a run on the same namespace, so they share envelopes, leases and fill notifications.
 *   The near cache is on (the default): hits are answered from this process's copies while the
 *   subscription is live.
 * - `herd-guard-redis-strict`: the same with `nearCache: false`: every hit reads Redis.
 * - `herd-guard-memory`: a `MemoryStore` per pod. Pods share nothing, so K pods in one benchmark
 *   process behave like K independent processes with the embedded store (one loader call per pod).
 *
 * TTL mapping: `soft: ttl.softMs`, `hard: ttl.hardMs`; everything else is the library default
 * (jitter 0.1, lease 5 s, wait 5 s, stale-while-revalidate on, backoff 1 s..30 s). Every call
 * passes a new options object written inline, as application code does
 * (`getOrLoad(key, loader, { policy: { soft: '1m' } })`): nothing is cached by the adapter.
 */
import { type CachePolicy, HerdEngine, type HerdStore, MemoryStore } from '../../lib/index.js';
import { RedisStore } from '../../lib/redis.js';
import { OtelContext, openTelemetry } from './otel-sdk.js';

import {
  type PeerFactory,
  type PeerInvalidation,
  type PeerLoader,
  type PeerPod,
  type PeerServed,
  type PeerTtl,
} from './peer.js';

export type HerdGuardStoreKind = 'memory' | 'redis';

export interface HerdGuardPeerOptions {
  readonly store: HerdGuardStoreKind;
  /** Redis store only: the near cache (default on, as in the library). */
  readonly nearCache?: boolean;
  /** Extra default policy for every pod (merged under the per-call soft/hard). */
  readonly policy?: CachePolicy;
  /** OpenTelemetry tracing and metrics on, with an SDK registered in the process. */
  readonly otel?: boolean;
}

export class HerdGuardPod implements PeerPod, PeerInvalidation {
  /** Only pods sharing a store see each other's writes (the Redis store). */
  readonly invalidation: PeerInvalidation | undefined;

  constructor(
    readonly engine: HerdEngine,
    readonly store: HerdStore,
    shared: boolean,
    /** The SDK's context manager of an OpenTelemetry pod, on while the pod is open or entered. */
    readonly otel?: OtelContext,
  ) {
    this.invalidation = shared ? this : undefined;
    otel?.on();
  }

  enter(): void {
    this.otel?.on();
  }

  leave(): void {
    this.otel?.off();
  }

  get(key: string, loader: PeerLoader, ttl: PeerTtl): Promise<string> {
    return this.engine.getOrLoad(key, loader, { policy: { soft: ttl.softMs, hard: hardOf(ttl) } });
  }

  async read(key: string, loader: PeerLoader, ttl: PeerTtl): Promise<PeerServed> {
    const result = await this.engine.read(key, loader, {
      policy: { soft: ttl.softMs, hard: hardOf(ttl) },
    });
    return { value: result.value, stale: result.path === 'stale' };
  }

  set(key: string, value: string, ttl: PeerTtl): Promise<void> {
    return this.engine.set(key, value, { policy: { soft: ttl.softMs, hard: hardOf(ttl) } });
  }

  async expire(key: string): Promise<void> {
    await this.engine.expire(key);
  }

  async close(): Promise<void> {
    await this.engine.close();
    await this.store.close();
    this.otel?.off();
  }
}

function hardOf(ttl: PeerTtl): number {
  return Math.max(ttl.softMs, ttl.hardMs);
}

export function createHerdGuardPeer(options: HerdGuardPeerOptions): PeerFactory {
  const strict = options.store === 'redis' && options.nearCache === false;
  return {
    name: `herd-guard-${options.store}${strict ? '-strict' : ''}${options.otel === true ? '+otel' : ''}`,
    description:
      options.otel === true
        ? 'herd-guard-memory with OpenTelemetry tracing and metrics on (an SDK registered, spans dropped)'
        : options.store === 'memory'
          ? 'HerdEngine + MemoryStore per pod (one process each: in-process singleflight + SWR, nothing shared)'
          : strict
            ? 'HerdEngine + RedisStore per pod, nearCache: false (every hit reads Redis; cluster-wide lease, fill notification, SWR)'
            : 'HerdEngine + RedisStore per pod (near cache on, the default; cluster-wide lease, fill notification, SWR)',
    invalidates: options.store === 'redis',
    async createPod(redisUrl, namespace) {
      let store: HerdStore;
      if (options.store === 'redis') {
        const redis = new RedisStore({
          url: redisUrl,
          namespace,
          ...(strict ? { nearCache: false } : {}),
        });
        if (!(await redis.ready(10_000))) {
          await redis.close();
          throw new Error(`herd-guard RedisStore did not connect to ${redisUrl}`);
        }
        store = redis;
      } else {
        store = new MemoryStore();
      }
      const engine = new HerdEngine({ store, policy: options.policy });
      if (options.otel !== true) return new HerdGuardPod(engine, store, options.store === 'redis');
      openTelemetry(engine);
      return new HerdGuardPod(engine, store, options.store === 'redis', new OtelContext());
    },
  };
}

export const herdGuardMemoryPeer: PeerFactory = createHerdGuardPeer({ store: 'memory' });
export const herdGuardMemoryOtelPeer: PeerFactory = createHerdGuardPeer({
  store: 'memory',
  otel: true,
});
export const herdGuardRedisPeer: PeerFactory = createHerdGuardPeer({ store: 'redis' });
export const herdGuardRedisStrictPeer: PeerFactory = createHerdGuardPeer({
  store: 'redis',
  nearCache: false,
});
