/**
 * Peer (d): bentocache as its docs recommend for multi-instance deployments.
 *
 * Docs followed (bentocache 1.x, https://bentocache.dev/docs):
 * - Multi tier: L1 `memoryDriver` + L2 `redisDriver` + `redisBusDriver` (Redis pub/sub) so that the
 *   in-memory L1 of every instance is invalidated when another instance writes.
 *   https://bentocache.dev/docs/multi-tier
 * - Stampede protection: `getOrSet` takes an in-memory per-key lock, so concurrent callers of one
 *   instance run the factory once; across instances there is no distributed lock (one factory
 *   call per instance at most). https://bentocache.dev/docs/stampede-protection
 * - Grace periods: `grace` keeps an entry available after its `ttl` so a stale value can be served
 *   when the factory fails or is slow. https://bentocache.dev/docs/grace-periods
 * - Soft timeouts: `timeout` (default 0) applies only when a graced value exists: 0 means the stale
 *   value is returned at once and the factory refreshes in the background; `hardTimeout` makes a
 *   slow factory throw. https://bentocache.dev/docs/timeouts and https://bentocache.dev/docs/options
 * - Shutdown: `bento.disconnect()` closes the default store's L1, L2 and bus
 *   (`disconnectAll()` for every named store). https://bentocache.dev/docs/methods
 *
 * Mapping of PeerTtl:
 * - `ttl: softMs` (logical TTL), `grace: hardMs`. In bentocache 1.6 the physical TTL written to the
 *   L1/L2 is the grace duration itself when grace is on (`createCacheEntryOptions` in
 *   build/index.js: `physicalTtl = grace > 0 ? grace : logicalTtl`), so grace is the total lifetime,
 *   which is what `hardMs` means. If `hardMs <= softMs`, grace is disabled.
 * - `timeout: 0` (the documented default, set explicitly): serve stale immediately, refresh behind.
 *   `graceBackoff` keeps its default (10 s; only used when the factory throws).
 * - `prefix: namespace` so every pod of one run shares the same L2 keys.
 *
 * Writes and invalidations (S8): `set({ key, value, ttl, grace })` and `expire({ key })`
 * (https://bentocache.dev/docs/methods) write L2 and publish on the bus, and every other instance
 * then expires its L1 copy logically: its next `getOrSet` reads the new value from L2 (after a
 * `set`) or serves the graced value while the factory refreshes it (after an `expire`), the same
 * states herd-guard's `set` and `expire` lead to. Whether an answer was graced is read from the
 * `cache:hit` event (`graced`), emitted synchronously before `getOrSet` resolves; the listener is
 * added on the first such read only, so the other scenarios run with no listener.
 *
 * Connections: the drivers get ioredis connection *options* (as in the docs), so bentocache owns
 * the clients and `disconnect()` closes all three (L2 client + bus publisher + bus subscriber).
 * ioredis must be ^5.3.2 (bentocache's peer range).
 */
import { EventEmitter } from 'node:events';

import { BentoCache, bentostore } from 'bentocache';
import { memoryDriver } from 'bentocache/drivers/memory';
import { redisBusDriver, redisDriver } from 'bentocache/drivers/redis';

import {
  type PeerFactory,
  type PeerInvalidation,
  type PeerLoader,
  type PeerPod,
  type PeerServed,
  type PeerTtl,
  redisConnectionFromUrl,
} from './peer.js';

export interface BentocachePeerOptions {
  /** Soft timeout (ms) while a graced value exists. Default 0 (bentocache's default). */
  softTimeoutMs?: number;
  /** L1 size limit (docs example: '10mb'). */
  l1MaxSize?: string;
}

class BentocachePod implements PeerPod, PeerInvalidation {
  readonly invalidation: PeerInvalidation = this;
  /** Whether the last `cache:hit` was graced; written by the listener `read` adds, reset by `read`. */
  #lastHitGraced = false;
  #listening = false;

  constructor(
    private readonly bento: BentoCache<{ multitier: ReturnType<typeof bentostore> }>,
    private readonly emitter: EventEmitter,
    private readonly softTimeoutMs: number,
  ) {}

  get(key: string, loader: PeerLoader, ttl: PeerTtl): Promise<string> {
    return this.bento.getOrSet<string>({
      key,
      factory: loader,
      ttl: ttl.softMs,
      grace: graceOf(ttl),
      timeout: this.softTimeoutMs,
    });
  }

  async read(key: string, loader: PeerLoader, ttl: PeerTtl): Promise<PeerServed> {
    if (!this.#listening) {
      this.#listening = true;
      this.emitter.on(
        'cache:hit',
        (event: { graced?: boolean }) => (this.#lastHitGraced = event.graced === true),
      );
    }
    this.#lastHitGraced = false;
    const value = await this.get(key, loader, ttl);
    return { value, stale: this.#lastHitGraced };
  }

  async set(key: string, value: string, ttl: PeerTtl): Promise<void> {
    await this.bento.set({ key, value, ttl: ttl.softMs, grace: graceOf(ttl) });
  }

  async expire(key: string): Promise<void> {
    await this.bento.expire({ key });
  }

  async close(): Promise<void> {
    await this.bento.disconnectAll();
  }
}

function graceOf(ttl: PeerTtl): number | false {
  return ttl.hardMs > ttl.softMs ? ttl.hardMs : false;
}

export function createBentocachePeer(options: BentocachePeerOptions = {}): PeerFactory {
  const softTimeoutMs = options.softTimeoutMs ?? 0;
  const l1MaxSize = options.l1MaxSize ?? '10mb';
  return {
    name: softTimeoutMs === 0 ? 'bentocache' : `bentocache-timeout${softTimeoutMs}`,
    description: `bentocache L1 memory + L2 redis + redis bus, getOrSet({ ttl: softMs, grace: hardMs, timeout: ${softTimeoutMs} })`,
    invalidates: true,
    async createPod(redisUrl, namespace) {
      const connection = redisConnectionFromUrl(redisUrl);
      // Bentocache's default emitter is a Node EventEmitter too; this one is ours to listen to.
      const emitter = new EventEmitter();
      const bento = new BentoCache({
        default: 'multitier',
        prefix: namespace,
        emitter,
        stores: {
          multitier: bentostore()
            .useL1Layer(memoryDriver({ maxSize: l1MaxSize }))
            .useL2Layer(redisDriver({ connection }))
            .useBus(redisBusDriver({ connection })),
        },
      });
      // Touch L2 so the connection is up before any herd (L1 miss -> L2 GET).
      await bento.has({ key: '__warmup__' });
      return new BentocachePod(bento, emitter, softTimeoutMs);
    },
  };
}

export const bentocachePeer: PeerFactory = createBentocachePeer();
