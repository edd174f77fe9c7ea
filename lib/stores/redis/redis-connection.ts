import { Cluster, Redis, type RedisOptions } from 'ioredis';
import { parseDuration } from '../../core/duration.js';
import { ConfigurationError } from '../../errors/configuration.error.js';
import { StoreError } from '../../errors/store.error.js';
import { EVICTION_POLICIES, type RedisStoreOptions } from './redis-store.options.js';
import { type KeySpace, isValidNamespace } from './redis-keys.js';
import {
  ACQUIRE_LEASE,
  ADD_TO_INDEX,
  CLEAR,
  END_LEASE,
  EXTEND_LEASE,
  FILL,
  HEDGE,
  INDEX_MEMBERS,
  INVALIDATED_AT,
  INVALIDATE,
  RELEASE_LEASE,
  type RedisScript,
  SETTLE_READ,
  SET_VALUE,
  type ScriptArgs,
} from './redis-scripts.js';

/**
 * The scripts registered on the client by `defineCommand`, typed locally (no global augmentation).
 * Each takes the KEYS and ARGV its script's `args` lays out, and answers what the script returns.
 */
export interface HerdGuardCommands {
  herdGuardAcquire(
    ...args: ScriptArgs<typeof ACQUIRE_LEASE>
  ): Promise<[number, string, string | null, number, string | null]>;
  herdGuardEndLease(...args: ScriptArgs<typeof END_LEASE>): Promise<number>;
  herdGuardHedge(...args: ScriptArgs<typeof HEDGE>): Promise<number>;
  herdGuardFill(...args: ScriptArgs<typeof FILL>): Promise<number>;
  herdGuardSet(...args: ScriptArgs<typeof SET_VALUE>): Promise<string>;
  herdGuardInvalidate(...args: ScriptArgs<typeof INVALIDATE>): Promise<[number, string]>;
  herdGuardRelease(...args: ScriptArgs<typeof RELEASE_LEASE>): Promise<number>;
  herdGuardExtend(...args: ScriptArgs<typeof EXTEND_LEASE>): Promise<number>;
  herdGuardIndex(...args: ScriptArgs<typeof ADD_TO_INDEX>): Promise<number>;
  herdGuardIndexMembers(...args: ScriptArgs<typeof INDEX_MEMBERS>): Promise<string[]>;
  herdGuardInvalidatedAt(...args: ScriptArgs<typeof INVALIDATED_AT>): Promise<[number, number]>;
  herdGuardSettleRead(
    ...args: ScriptArgs<typeof SETTLE_READ>
  ): Promise<[string | null, string | null]>;
  herdGuardClear(...args: ScriptArgs<typeof CLEAR>): Promise<string>;
}

export type Client = (Redis | Cluster) & HerdGuardCommands;

/**
 * Safe defaults for connections herd-guard opens: fail fast instead of queueing while Redis is
 * away.
 */
const CONNECTION_DEFAULTS: RedisOptions = {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
  connectTimeout: 2_000,
  // After a lost connection ioredis arms this timer on close and may never clear it: keep it short.
  disconnectTimeout: 200,
  retryStrategy: (attempt: number) => Math.min(50 * 2 ** attempt, 2_000),
  reconnectOnError: (error: Error) => (isTalkingToReplica(error) ? 1 : false),
};

/**
 * Reply errors by which a node says it cannot serve (not that a command was wrong): it is a replica
 * now (READONLY, MASTERDOWN), loading its data (LOADING), stuck in a script (BUSY), out of memory
 * under `noeviction` (OOM), refusing writes it cannot persist or replicate (MISCONF, NOREPLICAS),
 * not authenticated any more (NOAUTH), or its Cluster cannot serve the slot (CLUSTERDOWN). Not
 * TRYAGAIN: ioredis retries it, and it concerns one multi-key command during resharding.
 */
const CANNOT_SERVE =
  /^(READONLY|MASTERDOWN|LOADING|BUSY|OOM|MISCONF|NOREPLICAS|NOAUTH|CLUSTERDOWN) /;

/** A reply error meaning the node cannot serve now: a store failure, not an answer. */
export function isCannotServe(error: unknown): boolean {
  return isReplyError(error) && CANNOT_SERVE.test((error as Error).message);
}

/**
 * The node is a replica now (a failover demoted it): reconnecting reaches the new primary when the
 * address follows it (Sentinel asks the Sentinels again; a DNS name or virtual IP moved).
 */
function isTalkingToReplica(error: Error): boolean {
  return /^(READONLY|MASTERDOWN) /.test(error.message);
}

export function connect(options: RedisStoreOptions): Redis | Cluster {
  if (options.cluster !== undefined) {
    const nodes = options.cluster.nodes.map((node) =>
      typeof node === 'string' ? node : { host: node.host, port: node.port },
    );
    return letProcessExit(
      new Cluster(nodes, {
        enableOfflineQueue: false,
        clusterRetryStrategy: (attempt: number) => Math.min(50 * 2 ** attempt, 2_000),
        ...options.cluster.options,
        redisOptions: { ...CONNECTION_DEFAULTS, ...options.cluster.options?.redisOptions },
      }),
    );
  }
  const settings = { ...CONNECTION_DEFAULTS, ...options.redisOptions };
  return letProcessExit(
    options.url === undefined ? new Redis(settings) : new Redis(options.url, settings),
  );
}

/**
 * A connection herd-guard opens never keeps the process alive by itself (its socket is unref'd
 * once connected): when an app's bootstrap fails after the store connected, Nest calls no shutdown
 * hook, and the process must still be able to exit. A command out keeps it alive meanwhile (see
 * CommandDeadlines). On a Cluster, the nodes' connections; not the one ioredis keeps for SUBSCRIBE
 * (it has no public handle).
 */
export function letProcessExit<T extends Redis | Cluster>(connection: T): T {
  const unref = (node: Redis): void => {
    node.on('connect', () => node.stream?.unref?.());
  };
  if (connection instanceof Cluster) connection.on('+node', unref);
  else unref(connection);
  return connection;
}

export function defineCommands(client: Redis | Cluster): Client {
  const define = (name: keyof HerdGuardCommands, script: RedisScript<never>) =>
    client.defineCommand(name, { numberOfKeys: script.numberOfKeys, lua: script.lua });
  define('herdGuardAcquire', ACQUIRE_LEASE);
  define('herdGuardFill', FILL);
  define('herdGuardSet', SET_VALUE);
  define('herdGuardInvalidate', INVALIDATE);
  define('herdGuardRelease', RELEASE_LEASE);
  define('herdGuardExtend', EXTEND_LEASE);
  define('herdGuardEndLease', END_LEASE);
  define('herdGuardHedge', HEDGE);
  define('herdGuardIndex', ADD_TO_INDEX);
  define('herdGuardIndexMembers', INDEX_MEMBERS);
  define('herdGuardInvalidatedAt', INVALIDATED_AT);
  define('herdGuardSettleRead', SETTLE_READ);
  define('herdGuardClear', CLEAR);
  return client as Client;
}

/** The database and key prefix a client's commands go to (a Cluster has only database 0). */
export function keySpaceOf(client: Redis | Cluster): KeySpace {
  const keyPrefix = client.options.keyPrefix ?? '';
  if (client instanceof Cluster) return { db: 0, keyPrefix, cluster: true };
  return { db: client.options.db ?? 0, keyPrefix };
}

/**
 * A dedicated connection for SUBSCRIBE; unlike command connections it may queue until connected.
 */
export function subscriberFor(client: Redis | Cluster): Redis | Cluster {
  if (client instanceof Cluster)
    return letProcessExit(client.duplicate(undefined, { enableOfflineQueue: true }));
  // It subscribes itself on every 'ready' (NotificationSubscriber); ioredis's own resubscribe
  // would leave a rejected promise nobody handles when the connection drops again meanwhile.
  return letProcessExit(
    client.duplicate({ enableOfflineQueue: true, disconnectTimeout: 200, autoResubscribe: false }),
  );
}

export async function closeConnection(connection: Redis | Cluster): Promise<void> {
  if (connection.status === 'end') return;
  // Keeps the process alive until QUIT is answered (the socket does not: see letProcessExit).
  let timer: NodeJS.Timeout | undefined;
  try {
    if (connection.status !== 'ready') throw new Error('not connected');
    const quit = connection.quit();
    // Rejected by disconnect() below when QUIT got no reply in time: nobody awaits it then.
    quit.catch(() => undefined);
    await Promise.race([quit, new Promise((_, reject) => (timer = setTimeout(reject, 1_000)))]);
  } catch {
    connection.disconnect();
  } finally {
    clearTimeout(timer);
  }
}

export function validateStoreOptions(options: RedisStoreOptions): void {
  const sources = [options.url, options.client, options.cluster].filter(
    (source) => source !== undefined,
  );
  if (sources.length > 1)
    throw new ConfigurationError('redis', 'give only one of url, client and cluster');
  if (
    options.redisOptions !== undefined &&
    (options.client !== undefined || options.cluster !== undefined)
  ) {
    throw new ConfigurationError(
      'redis.redisOptions',
      'applies only to a connection opened from url or options; configure your own client directly',
    );
  }
  if (options.namespace !== undefined && !isValidNamespace(options.namespace)) {
    throw new ConfigurationError(
      'redis.namespace',
      `use 1-64 characters from A-Z a-z 0-9 . _ : -, received ${JSON.stringify(options.namespace)}`,
    );
  }
  if (options.url !== undefined && !/^rediss?:\/\//.test(options.url)) {
    throw new ConfigurationError(
      'redis.url',
      `expected redis://host:port or rediss://host:port, received ${JSON.stringify(options.url)}`,
    );
  }
  const replicas = options.waitForReplicas;
  if (replicas !== undefined && (!Number.isInteger(replicas) || replicas < 0)) {
    throw new ConfigurationError(
      'redis.waitForReplicas',
      `expected a whole number of replicas (0 for none), received ${replicas}`,
    );
  }
  const threshold = options.breakerThreshold;
  if (threshold !== undefined && (!Number.isInteger(threshold) || threshold < 1)) {
    throw new ConfigurationError(
      'redis.breakerThreshold',
      `expected a positive integer, received ${threshold}`,
    );
  }
  validateNearCache(options.nearCache);
  const policy: unknown = options.evictionPolicy;
  if (policy !== undefined && !(EVICTION_POLICIES as readonly unknown[]).includes(policy)) {
    throw new ConfigurationError(
      'redis.evictionPolicy',
      `expected one of ${EVICTION_POLICIES.join(', ')}, received ${JSON.stringify(policy)}`,
    );
  }
  if (
    options.commandTimeout !== undefined &&
    parseDuration(options.commandTimeout, 'redis.commandTimeout') <= 0
  ) {
    throw new ConfigurationError('redis.commandTimeout', 'must be greater than 0');
  }
}

function validateNearCache(near: unknown): void {
  if (near === undefined || typeof near === 'boolean') return;
  if (typeof near !== 'object' || near === null || Array.isArray(near)) {
    throw new ConfigurationError(
      'redis.nearCache',
      'expected true, false or { maxEntries, maxBytes }',
    );
  }
  for (const [name, value] of Object.entries(near)) {
    if (name !== 'maxEntries' && name !== 'maxBytes') {
      throw new ConfigurationError(
        `redis.nearCache.${name}`,
        'unknown option; known options are maxEntries, maxBytes',
      );
    }
    if (!Number.isSafeInteger(value) || (value as number) < 1) {
      throw new ConfigurationError(
        `redis.nearCache.${name}`,
        `expected a positive integer, received ${String(value)}`,
      );
    }
  }
}

export function isReplyError(error: unknown): boolean {
  return error instanceof Error && error.name === 'ReplyError';
}

export function isWrongType(error: unknown): boolean {
  const cause = error instanceof StoreError ? error.cause : error;
  return isReplyError(cause) && (cause as Error).message.startsWith('WRONGTYPE');
}

export function describeError(error: unknown): string | undefined {
  if (error === undefined) return undefined;
  return error instanceof Error ? error.message : String(error);
}
