/**
 * Common contract for the caching approaches ("peers") that herd-guard is benchmarked against.
 *
 * The benchmark simulates K independent pods inside one Node process: every pod gets its own
 * `PeerPod` (own Redis connections, own in-process memory), and C concurrent callers per pod ask
 * for the same key through `PeerPod.get`, with a counted loader standing in for the backend.
 *
 * TTL semantics (the same `PeerTtl` is passed to every peer):
 * - `softMs`: freshness TTL. Once a value is older than this, it has to be reloaded.
 * - `hardMs`: how long a stale value may still be served while a refresh runs, for peers
 *   that support stale-while-revalidate / grace. `hardMs >= softMs`.
 *
 * How each peer maps it (see the peer files for details and doc references):
 * - no-protection, singleflight: plain Redis TTL = `softMs`. They cannot serve stale data, so the
 *   freshness bound is the only TTL that keeps them as fresh as the others (using `hardMs` would
 *   serve data older than `softMs` as if it were fresh).
 * - cache-manager: `wrap(key, fn, { ttl: hardMs, refreshThreshold: hardMs - softMs })`, its documented
 *   background refresh: once the remaining TTL drops below the threshold (i.e. the value is older
 *   than `softMs`) the cached value is returned and the function re-runs in the background.
 *   A `plain` mode (`ttl: softMs`, no refresh threshold) is available too.
 * - bentocache: `ttl: softMs` (logical TTL), `grace: hardMs` (bentocache's grace is the physical
 *   lifetime of the entry counted from the write, not an extra period added after `ttl`).
 *
 * `namespace` isolates one benchmark run from another in the shared Redis: all pods of the same run
 * must be created with the same namespace so that they share the Redis entries (that is what makes
 * them a cluster), and a new run should use a fresh namespace so that it starts cold.
 */

export interface PeerTtl {
  /** Freshness TTL in milliseconds. */
  softMs: number;
  /** Maximum age in milliseconds up to which a stale value may be served (peers with grace only). */
  hardMs: number;
}

export type PeerLoader = () => Promise<string>;

export interface PeerPod {
  /** Read-through get: returns the cached value or the loader's result, as the peer's strategy decides. */
  get(key: string, loader: PeerLoader, ttl: PeerTtl): Promise<string>;
  /** Writes and invalidations seen by every pod of the cluster, for peers that have them (S8). */
  readonly invalidation?: PeerInvalidation;
  /** Releases every handle the pod holds (sockets, timers) so that the process can exit by itself. */
  close(): Promise<void>;
  /**
   * For a scenario that measures pods of several peers in turns (S5): switches on, for this pod's
   * turn, what it changes in the whole process (an OpenTelemetry context manager); `leave()` undoes
   * it. Open pods are entered until left once.
   */
  enter?(): void;
  leave?(): void;
}

/** What a pod answered one read with. */
export interface PeerServed {
  readonly value: string;
  /** Served past its freshness (soft TTL, grace) or after an invalidation, while a refresh runs. */
  readonly stale: boolean;
}

/**
 * A cluster-wide write and invalidation, as the peer's own API offers them: a call on one pod
 * reaches every pod (through the shared store and the peer's notifications or bus).
 */
export interface PeerInvalidation {
  /** Stores `value` as the key's current value (a write-through after an update). */
  set(key: string, value: string, ttl: PeerTtl): Promise<void>;
  /** Marks the key stale: the next reads are answered stale while one refresh runs. */
  expire(key: string): Promise<void>;
  /** Like `PeerPod.get`, saying whether the answer was stale. One such read at a time per pod. */
  read(key: string, loader: PeerLoader, ttl: PeerTtl): Promise<PeerServed>;
}

export interface PeerFactory {
  /** Short, stable identifier used in result tables. */
  readonly name: string;
  /** One line saying how the peer is configured. */
  readonly description: string;
  /** Its pods offer `invalidation` (the invalidation scenario runs only these). */
  readonly invalidates?: boolean;
  /** Creates one pod, already connected to Redis (connection set-up is not part of a measured herd). */
  createPod(redisUrl: string, namespace: string): Promise<PeerPod>;
}

/** Connection options parsed from a `redis://[user:pass@]host:port[/db]` URL (ioredis `RedisOptions` shape). */
export interface RedisConnectionOptions {
  host: string;
  port: number;
  db?: number;
  username?: string;
  password?: string;
}

export function redisConnectionFromUrl(redisUrl: string): RedisConnectionOptions {
  const url = new URL(redisUrl);
  if (url.protocol !== 'redis:') {
    throw new Error(`Only redis:// URLs are supported by the bench peers, got ${url.protocol}`);
  }
  const options: RedisConnectionOptions = {
    host: url.hostname || '127.0.0.1',
    port: url.port ? Number(url.port) : 6379,
  };
  const db = url.pathname.replace(/^\//, '');
  if (db) options.db = Number(db);
  if (url.username) options.username = decodeURIComponent(url.username);
  if (url.password) options.password = decodeURIComponent(url.password);
  return options;
}

/** Redis key used by the hand-written peers (no-protection, singleflight). */
export function namespacedKey(namespace: string, key: string): string {
  return `${namespace}:${key}`;
}
