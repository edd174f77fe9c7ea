/**
 * Peer (b): in-process singleflight on top of the plain Redis read-through of peer (a).
 *
 * Concurrent callers of the same key inside one pod share one in-flight promise (Go's
 * `singleflight.Group.Do` pattern): the first caller runs the whole read-through
 * (GET, and on a miss loader + SET), the others await its result. The entry is dropped when the
 * promise settles, so errors are not cached. Nothing is coordinated across pods: on a cold key
 * each pod still calls the loader once.
 *
 * TTL: Redis TTL = `ttl.softMs`, as in peer (a).
 */
import { connectIoRedis, NoProtectionPod } from './no-protection.peer.js';
import { type PeerFactory, type PeerLoader, type PeerTtl } from './peer.js';

export class SingleflightPod extends NoProtectionPod {
  private readonly inFlight = new Map<string, Promise<string>>();

  override get(key: string, loader: PeerLoader, ttl: PeerTtl): Promise<string> {
    const pending = this.inFlight.get(key);
    if (pending) return pending;
    const promise = this.readThrough(key, loader, ttl).finally(() => {
      this.inFlight.delete(key);
    });
    this.inFlight.set(key, promise);
    return promise;
  }
}

export const singleflightPeer: PeerFactory = {
  name: 'singleflight',
  description:
    'Redis read-through + per-pod in-process singleflight (whole GET/load/SET shared per key)',
  async createPod(redisUrl, namespace) {
    return new SingleflightPod(await connectIoRedis(redisUrl), namespace);
  },
};
