/**
 * herd-guard itself, behind the same PeerPod interface as the peers it is compared with.
 *
 * One pod = one `HerdEngine` over its own store, used through the public API (`getOrLoad`):
 * - `herd-guard-redis`: a `RedisStore` per pod (its own command and subscriber connections), all
 *   pods of a run on the same namespace, so they share envelopes, leases and fill notifications.
 * - `herd-guard-memory`: a `MemoryStore` per pod. Pods share nothing, so K pods in one benchmark
 *   process behave like K independent processes with the embedded store (one loader call per pod).
 *
 * TTL mapping: `soft: ttl.softMs`, `hard: ttl.hardMs`; everything else is the library default
 * (jitter 0.1, lease 5 s, wait 5 s, stale-while-revalidate on, backoff 1 s..30 s). The per-call
 * policy object is built once per distinct TTL and reused, as a decorator or a service would.
 */
import { type CachePolicy, HerdEngine, type HerdStore, MemoryStore, type ReadOptions } from '../../lib/index.js';
import { RedisStore } from '../../lib/redis.js';

import { type PeerFactory, type PeerLoader, type PeerPod, type PeerTtl } from './peer.js';

export type HerdGuardStoreKind = 'memory' | 'redis';

export interface HerdGuardPeerOptions {
  readonly store: HerdGuardStoreKind;
  /** Extra default policy for every pod (merged under the per-call soft/hard). */
  readonly policy?: CachePolicy;
}

export class HerdGuardPod implements PeerPod {
  /** Read options per TTL, built once; the last one is kept for the common case of one TTL. */
  readonly #optionsByTtl = new Map<string, ReadOptions>();
  #lastTtl: PeerTtl | undefined;
  #lastOptions: ReadOptions = {};

  constructor(
    readonly engine: HerdEngine,
    readonly store: HerdStore,
  ) {}

  get(key: string, loader: PeerLoader, ttl: PeerTtl): Promise<string> {
    return this.engine.getOrLoad(key, loader, this.#optionsFor(ttl));
  }

  async close(): Promise<void> {
    await this.engine.close();
    await this.store.close();
  }

  #optionsFor(ttl: PeerTtl): ReadOptions {
    if (ttl === this.#lastTtl) return this.#lastOptions;
    const id = `${ttl.softMs}/${ttl.hardMs}`;
    let options = this.#optionsByTtl.get(id);
    if (options === undefined) {
      options = { policy: { soft: ttl.softMs, hard: Math.max(ttl.softMs, ttl.hardMs) } };
      this.#optionsByTtl.set(id, options);
    }
    this.#lastTtl = ttl;
    this.#lastOptions = options;
    return options;
  }
}

export function createHerdGuardPeer(options: HerdGuardPeerOptions): PeerFactory {
  return {
    name: `herd-guard-${options.store}`,
    description:
      options.store === 'redis'
        ? 'HerdEngine + RedisStore per pod (shared namespace: cluster-wide lease, fill notification, SWR)'
        : 'HerdEngine + MemoryStore per pod (one process each: in-process singleflight + SWR, nothing shared)',
    async createPod(redisUrl, namespace) {
      let store: HerdStore;
      if (options.store === 'redis') {
        const redis = new RedisStore({ url: redisUrl, namespace });
        if (!(await redis.ready(10_000))) {
          await redis.close();
          throw new Error(`herd-guard RedisStore did not connect to ${redisUrl}`);
        }
        store = redis;
      } else {
        store = new MemoryStore();
      }
      return new HerdGuardPod(new HerdEngine({ store, policy: options.policy }), store);
    },
  };
}

export const herdGuardMemoryPeer: PeerFactory = createHerdGuardPeer({ store: 'memory' });
export const herdGuardRedisPeer: PeerFactory = createHerdGuardPeer({ store: 'redis' });
