/**
 * Everything compared in one run, in table order. A pod process looks its contender up here by
 * name, so a new contender only needs a line in this list.
 */
import { bentocachePeer } from './peers/bentocache.peer.js';
import { cacheManagerPeer } from './peers/cache-manager.peer.js';
import {
  herdGuardMemoryOtelPeer,
  herdGuardMemoryPeer,
  herdGuardRedisPeer,
  herdGuardRedisStrictPeer,
} from './peers/herd-guard.peer.js';
import { lruCachePeer, memorySingleflightPeer } from './peers/lru-cache.peer.js';
import { noProtectionPeer } from './peers/no-protection.peer.js';
import { type PeerFactory } from './peers/peer.js';
import { singleflightPeer } from './peers/singleflight.peer.js';

export const CONTENDERS: readonly PeerFactory[] = [
  lruCachePeer,
  memorySingleflightPeer,
  noProtectionPeer,
  singleflightPeer,
  cacheManagerPeer,
  bentocachePeer,
  herdGuardMemoryPeer,
  herdGuardMemoryOtelPeer,
  herdGuardRedisPeer,
  herdGuardRedisStrictPeer,
];

/** The contender the targets are about. */
export const HERD_GUARD_REDIS = herdGuardRedisPeer.name;
export const HERD_GUARD_MEMORY = herdGuardMemoryPeer.name;
/** The in-process singleflight peer, the throughput reference of S4. */
export const SINGLEFLIGHT = singleflightPeer.name;

export function contenderByName(name: string): PeerFactory {
  const found = CONTENDERS.find((contender) => contender.name === name);
  if (found === undefined) {
    throw new Error(
      `unknown contender ${JSON.stringify(name)}; known: ${CONTENDERS.map((c) => c.name).join(', ')}`,
    );
  }
  return found;
}
