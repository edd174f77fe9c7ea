/**
 * References without Redis: what a hit costs at its floor, in one pod's memory.
 *
 * - `lru-cache`: a plain `LRUCache.get` (lru-cache 11) wrapped in a resolved promise; on a miss every
 *   caller runs the loader and sets the value. A value lives `hardMs` (a plain LRU has no stale
 *   state: it is the floor of a stale hit in S2, not a cache with herd-guard's freshness).
 * - `memory-singleflight`: the same LRU with TTL `softMs` (no stale serving, as peer (b)), and Go's
 *   `singleflight` on a miss: concurrent callers of a key in one pod share one loader run.
 *
 * Nothing is shared between pods: on a cold or expired key each pod calls the loader (once, or once
 * per caller).
 */
import { LRUCache } from 'lru-cache';

import { type PeerFactory, type PeerLoader, type PeerPod, type PeerTtl } from './peer.js';

const MAX_ENTRIES = 10_000;

export class LruCachePod implements PeerPod {
  protected readonly lru = new LRUCache<string, string>({ max: MAX_ENTRIES });

  get(key: string, loader: PeerLoader, ttl: PeerTtl): Promise<string> {
    const cached = this.lru.get(key);
    if (cached !== undefined) return Promise.resolve(cached);
    return this.load(key, loader, ttl.hardMs);
  }

  protected async load(key: string, loader: PeerLoader, ttlMs: number): Promise<string> {
    const value = await loader();
    this.lru.set(key, value, { ttl: Math.max(1, Math.round(ttlMs)) });
    return value;
  }

  async close(): Promise<void> {
    this.lru.clear();
  }
}

export class MemorySingleflightPod extends LruCachePod {
  private readonly inFlight = new Map<string, Promise<string>>();

  override get(key: string, loader: PeerLoader, ttl: PeerTtl): Promise<string> {
    const cached = this.lru.get(key);
    if (cached !== undefined) return Promise.resolve(cached);
    const pending = this.inFlight.get(key);
    if (pending !== undefined) return pending;
    const promise = this.load(key, loader, ttl.softMs).finally(() => this.inFlight.delete(key));
    this.inFlight.set(key, promise);
    return promise;
  }
}

export const lruCachePeer: PeerFactory = {
  name: 'lru-cache',
  description: 'plain in-process LRUCache.get per pod (TTL hardMs, no coalescing, no Redis)',
  async createPod() {
    return new LruCachePod();
  },
};

export const memorySingleflightPeer: PeerFactory = {
  name: 'memory-singleflight',
  description: 'in-process LRUCache (TTL softMs) + singleflight on a miss per pod (no Redis)',
  async createPod() {
    return new MemorySingleflightPod();
  },
};
