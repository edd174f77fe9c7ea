import { randomBytes } from 'node:crypto';
import { Cluster, Command, Redis, type RedisOptions } from 'ioredis';
import { LRUCache } from 'lru-cache';
import { parseDuration } from '../../core/duration.js';
import { type Entry, decodeEntry, encodeEntry, markedStale, withVersion } from '../../core/entry.js';
import { ConfigurationError } from '../../errors/configuration.error.js';
import { SerializationError } from '../../errors/serialization.error.js';
import { StoreError } from '../../errors/store.error.js';
import { FillSignals } from '../fill-signals.js';
import {
  type AcquireOptions,
  CORRUPT_ENTRY,
  type FillWatch,
  type HerdStore,
  type InvalidationMode,
  type InvalidationResult,
  type KeyIndex,
  type Lease,
  type LeaseAttempt,
  type StoreHealth,
  type StoreRead,
  type StoreSnapshot,
} from '../herd-store.interface.js';
import { CircuitBreaker } from './circuit-breaker.js';
import { CommandDeadlines } from './command-deadlines.js';
import { MAX_BROADCAST_ENVELOPE, decodeFillMessage, keyPart } from './fill-message.js';
import type { RedisStoreOptions } from './redis-store.options.js';
import { RedisKeys, isValidNamespace } from './redis-keys.js';
import {
  ACQUIRE_LEASE,
  ADD_TO_INDEX,
  EXTEND_LEASE,
  FILL,
  INVALIDATE,
  RELEASE_LEASE,
  SET_VALUE,
} from './redis-scripts.js';

/** An envelope this process saw, and the string it was read from (`undefined` when not known). */
interface SeenEntry {
  readonly entry: Entry;
  readonly raw: string | undefined;
}

/** The scripts registered on the client by `defineCommand`, typed locally (no global augmentation). */
interface HerdGuardCommands {
  herdGuardAcquire(
    lease: string,
    version: string,
    value: string,
    token: string,
    ttlMs: number,
    takeoverFrom: string,
  ): Promise<[number, string, string | null]>;
  herdGuardFill(
    value: string,
    lease: string,
    version: string,
    envelope: string,
    pxMs: number,
    fence: string,
    token: string,
    channel: string,
    keyPart: string,
    maxBroadcast: number,
  ): Promise<number>;
  herdGuardSet(
    value: string,
    lease: string,
    version: string,
    envelope: string,
    pxMs: number,
    channel: string,
    keyPart: string,
    maxBroadcast: number,
  ): Promise<string>;
  herdGuardInvalidate(
    value: string,
    lease: string,
    version: string,
    mode: InvalidationMode,
    channel: string,
    keyPart: string,
  ): Promise<[number, string]>;
  herdGuardRelease(lease: string, token: string, channel: string, keyPart: string, fence: string): Promise<number>;
  herdGuardExtend(lease: string, token: string, ttlMs: number): Promise<number>;
  herdGuardIndex(index: string, member: string, untilMs: number, nowMs: number): Promise<number>;
}

type Client = (Redis | Cluster) & HerdGuardCommands;

/** Safe defaults for connections herd-guard opens: fail fast instead of queueing while Redis is away. */
const CONNECTION_DEFAULTS: RedisOptions = {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
  connectTimeout: 2_000,
  // After a lost connection ioredis arms this timer on close and may never clear it: keep it short.
  disconnectTimeout: 200,
  retryStrategy: (attempt: number) => Math.min(50 * 2 ** attempt, 2_000),
};

/** A notified envelope is handed to a follower only this soon after it arrived. */
const PRIMED_TTL_MS = 1_000;
const MAX_PRIMED = 1_000;

/**
 * The store for many processes: envelopes, leases and fill notifications in Redis (standalone or
 * Cluster). While Redis is unreachable it answers from the envelopes it saw last (in process),
 * fails fast behind a circuit breaker, and reports itself degraded; it recovers by itself.
 */
export class RedisStore implements HerdStore {
  readonly name = 'redis';
  readonly keys: RedisKeys;
  readonly #client: Client;
  readonly #subscriber: Redis | Cluster;
  /** True when herd-guard opened `#client` (and so must close it). The subscriber is always ours. */
  readonly #ownsClient: boolean;
  readonly #signals = new FillSignals();
  readonly #breaker: CircuitBreaker;
  readonly #commandTimeoutMs: number;
  /**
   * Last envelope seen per key, with the string it was read from: served while Redis cannot answer,
   * and reused when a GET returns the same string again (no second JSON.parse of an unchanged value).
   */
  readonly #fallback: LRUCache<string, SeenEntry> | undefined;
  readonly #deadlines: CommandDeadlines;
  /**
   * GETs in flight, shared by concurrent readers of a key. An entry is dropped when a fill of the key
   * is announced or written here, so a read that starts after a fill never joins an older GET.
   */
  readonly #reads = new Map<string, Promise<StoreSnapshot>>();
  #closed = false;
  /**
   * Envelopes received with a fill notification while a follower of the key was waiting: its next
   * read takes the envelope from here instead of a GET. Consumed by that read; short-lived, bounded.
   */
  readonly #primed = new Map<string, { readonly entry: Entry; readonly receivedAt: number }>();
  /** Settles when the first SUBSCRIBE is acknowledged (ioredis re-subscribes by itself after reconnects). */
  readonly #subscribed: Promise<boolean>;

  constructor(options: RedisStoreOptions = {}) {
    validate(options);
    const namespace = options.namespace ?? 'hg';
    this.keys = new RedisKeys(namespace);
    this.#commandTimeoutMs = parseDuration(options.commandTimeout ?? '500ms', 'redis.commandTimeout');
    this.#deadlines = new CommandDeadlines(this.#commandTimeoutMs);
    this.#breaker = new CircuitBreaker(
      options.breakerThreshold ?? 5,
      parseDuration(options.breakerCooldown ?? '2s', 'redis.breakerCooldown'),
    );
    const fallbackEntries = options.fallbackEntries ?? 1_000;
    this.#fallback = fallbackEntries > 0 ? new LRUCache({ max: fallbackEntries }) : undefined;
    this.#ownsClient = options.client === undefined;
    this.#client = defineCommands(options.client ?? connect(options));
    // A dedicated subscriber connection: it may queue its SUBSCRIBE until connected.
    this.#subscriber = subscriberFor(this.#client);
    this.#subscriber.on('error', () => undefined);
    this.#subscriber.on('message', (channel: string, message: string) => {
      if (channel === this.keys.channel) this.#onMessage(message);
    });
    this.#subscribed = this.#subscriber.subscribe(this.keys.channel).then(
      () => true,
      () => false,
    );
    if (this.#ownsClient) this.#client.on('error', () => undefined);
  }

  /**
   * Resolves when the command connection is ready and fill notifications are subscribed, or after
   * `timeoutMs` with `false`. It never rejects: a store may start degraded and recover later.
   */
  async ready(timeoutMs = 2_000): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
    });
    const connected = new Promise<boolean>((resolve) => {
      if (this.#client.status === 'ready') return resolve(true);
      this.#client.once('ready', () => resolve(true));
    });
    try {
      const both = Promise.all([connected, this.#subscribed]).then(
        ([isConnected, isSubscribed]) => isConnected && isSubscribed,
      );
      return await Promise.race([both, timedOut]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * One MGET of the envelope and the version, shared by the readers of the key that arrive in the
   * same tick (a later reader may come after an invalidation, so it reads anew). Built as an ioredis
   * Command so a late reply can be rejected on the command itself: the breaker and time limit of
   * {@link #command} without a wrapping promise (this is the hot path of every hit).
   */
  get(key: string): Promise<StoreSnapshot> {
    const inflight = this.#reads.get(key);
    if (inflight !== undefined) return inflight;
    if (this.#primed.size > 0) {
      const primed = this.#primed.get(key);
      if (primed !== undefined) {
        this.#primed.delete(key);
        if (Date.now() - primed.receivedAt < PRIMED_TTL_MS) return Promise.resolve(snapshotOf(primed.entry));
      }
    }
    const refusal = this.#refusal('get', key);
    if (refusal !== undefined) return Promise.reject(refusal).catch((error: unknown) => this.#fallbackFor(key, error));
    const layout = this.keys.for(key);
    const command = new Command('mget', [layout.value, layout.version], {
      keyPrefix: this.#client.options.keyPrefix,
      replyEncoding: 'utf8',
    });
    const pending = this.#deadlines.track(() => {
      const error = new StoreError('get', `no reply within ${this.#commandTimeoutMs} ms (redis.commandTimeout)`, {
        key,
      });
      this.#breaker.failure(error);
      command.reject(error);
    });
    const read: Promise<StoreSnapshot> = (command.promise as Promise<[string | null, string | null]>).then(
      ([raw, version]) => {
        if (this.#deadlines.settle(pending)) this.#breaker.success();
        const entry = this.#decodeRead(key, raw);
        return { entry, version: Math.max(Number(version ?? 0), entryVersion(entry)) };
      },
      (error: unknown) => {
        if (this.#deadlines.settle(pending)) this.#countFailure(error);
        return this.#fallbackFor(key, this.#wrap('get', key, error));
      },
    );
    this.#reads.set(key, read);
    queueMicrotask(() => {
      if (this.#reads.get(key) === read) this.#reads.delete(key);
    });
    this.#client.sendCommand(command);
    return read;
  }

  async fill(key: string, entry: Entry, lease: Lease | undefined): Promise<boolean> {
    const envelope = this.#encode(key, entry);
    if (lease === undefined) {
      // Loaded while Redis could not be reached: kept for this process only.
      this.#remember(key, entry, envelope);
      return false;
    }
    const layout = this.keys.for(key);
    const pxMs = Math.max(1, Math.ceil(entry.hardExpireAt - Date.now()));
    const written = await this.#command('fill', key, () =>
      this.#client.herdGuardFill(
        layout.value,
        layout.lease,
        layout.version,
        envelope,
        pxMs,
        String(lease.fence),
        lease.token,
        this.keys.channel,
        keyPart(key),
        MAX_BROADCAST_ENVELOPE,
      ),
    );
    this.#changed(key);
    if (written !== 1) return false;
    this.#remember(key, entry, envelope);
    return true;
  }

  async set(key: string, entry: Entry): Promise<number> {
    const envelope = this.#encode(key, entry);
    const layout = this.keys.for(key);
    const pxMs = Math.max(1, Math.ceil(entry.hardExpireAt - Date.now()));
    const version = Number(
      await this.#command('set', key, () =>
        this.#client.herdGuardSet(
          layout.value,
          layout.lease,
          layout.version,
          envelope,
          pxMs,
          this.keys.channel,
          keyPart(key),
          MAX_BROADCAST_ENVELOPE,
        ),
      ),
    );
    this.#changed(key);
    this.#remember(key, withVersion(entry, version), undefined);
    return version;
  }

  /** Advances the version, revokes the lease, marks stale or deletes, and notifies every process. */
  async invalidate(key: string, mode: InvalidationMode): Promise<InvalidationResult> {
    const layout = this.keys.for(key);
    const [existed, version] = await this.#command(mode === 'delete' ? 'delete' : 'mark-stale', key, () =>
      this.#client.herdGuardInvalidate(
        layout.value,
        layout.lease,
        layout.version,
        mode,
        this.keys.channel,
        keyPart(key),
      ),
    );
    this.#changed(key);
    this.#forgetInvalidated(key, mode, Number(version));
    return { existed: existed === 1, version: Number(version) };
  }

  async addToIndex(index: KeyIndex, key: string, untilMs: number): Promise<void> {
    await this.#command('index', key, () =>
      this.#client.herdGuardIndex(this.#indexKey(index), key, Math.ceil(untilMs), Date.now()),
    );
  }

  async indexMembers(index: KeyIndex): Promise<string[]> {
    return this.#command('index-members', undefined, () =>
      this.#client.zrangebyscore(this.#indexKey(index), Date.now(), '+inf'),
    );
  }

  async acquireLease(key: string, ttlMs: number, options: AcquireOptions = {}): Promise<LeaseAttempt> {
    const layout = this.keys.for(key);
    const token = randomBytes(16).toString('base64url');
    const takeoverFrom = options.takeoverFrom === undefined ? '' : String(options.takeoverFrom);
    const [granted, version, raw] = await this.#command('acquire-lease', key, () =>
      this.#client.herdGuardAcquire(layout.lease, layout.version, layout.value, token, Math.ceil(ttlMs), takeoverFrom),
    );
    const entry = this.#decodeRead(key, raw);
    const current: StoreSnapshot = { entry, version: Math.max(Number(version), entryVersion(entry)) };
    if (granted !== 1) return { lease: undefined, current };
    return { lease: { key, token, fence: Number(version) }, current };
  }

  async extendLease(lease: Lease, ttlMs: number): Promise<boolean> {
    const extended = await this.#command('extend-lease', lease.key, () =>
      this.#client.herdGuardExtend(this.keys.for(lease.key).lease, lease.token, Math.ceil(ttlMs)),
    );
    return extended === 1;
  }

  async releaseLease(lease: Lease): Promise<void> {
    await this.#command('release-lease', lease.key, () =>
      this.#client.herdGuardRelease(
        this.keys.for(lease.key).lease,
        lease.token,
        this.keys.channel,
        keyPart(lease.key),
        String(lease.fence),
      ),
    );
  }

  watchFill(key: string): FillWatch {
    return this.#signals.watch(key);
  }

  health(): StoreHealth {
    if (this.#closed) return { status: 'down', breaker: this.#breaker.state, reason: 'closed' };
    const breaker = this.#breaker.state;
    if (breaker !== 'closed')
      return { status: 'degraded', breaker, reason: describe(this.#breaker.lastError) ?? 'breaker open' };
    if (this.#client.status !== 'ready')
      return { status: 'degraded', breaker, reason: `connection ${this.#client.status}` };
    return { status: 'up', breaker };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#signals.notifyAll();
    this.#deadlines.expireAll();
    await Promise.all([
      closeConnection(this.#subscriber),
      this.#ownsClient ? closeConnection(this.#client) : Promise.resolve(),
    ]);
  }

  /** Sends one command through the breaker, with a time limit; failures count towards opening it. */
  #command<T>(operation: string, key: string | undefined, send: () => Promise<T>): Promise<T> {
    const refusal = this.#refusal(operation, key);
    if (refusal !== undefined) return Promise.reject(refusal);
    return new Promise<T>((resolve, reject) => {
      const pending = this.#deadlines.track(() => {
        const error = new StoreError(operation, `no reply within ${this.#commandTimeoutMs} ms (redis.commandTimeout)`, {
          key,
        });
        this.#breaker.failure(error);
        reject(error);
      });
      send().then(
        (result) => {
          if (!this.#deadlines.settle(pending)) return;
          this.#breaker.success();
          resolve(result);
        },
        (error: unknown) => {
          if (!this.#deadlines.settle(pending)) return;
          this.#countFailure(error);
          reject(this.#wrap(operation, key, error));
        },
      );
    });
  }

  /** Why a command must not be sent now (store closed, breaker open), or `undefined`. */
  #refusal(operation: string, key: string | undefined): StoreError | undefined {
    if (this.#closed) return new StoreError(operation, 'the store is closed', { key });
    if (this.#breaker.allow()) return undefined;
    return new StoreError(operation, 'Redis is unavailable (circuit breaker open)', {
      key,
      cause: this.#breaker.lastError,
    });
  }

  /** A reply error means Redis answered: it is alive, so it does not count towards the breaker. */
  #countFailure(error: unknown): void {
    if (isReplyError(error)) this.#breaker.success();
    else this.#breaker.failure(error);
  }

  #wrap(operation: string, key: string | undefined, error: unknown): StoreError {
    return error instanceof StoreError
      ? error
      : new StoreError(operation, describe(error) ?? 'unknown error', { key, cause: error });
  }

  #decodeRead(key: string, raw: string | null): StoreRead {
    if (raw === null) return undefined;
    const seen = this.#fallback?.get(key);
    if (seen !== undefined && seen.raw === raw) return seen.entry;
    const entry = decodeEntry(raw);
    if (entry === undefined) return CORRUPT_ENTRY;
    this.#remember(key, entry, raw);
    return entry;
  }

  /** Keeps the newest envelope (by version) seen for `key`, to answer from while Redis cannot. */
  #remember(key: string, entry: Entry, raw: string | undefined): void {
    if (this.#fallback === undefined) return;
    const seen = this.#fallback.get(key);
    if (seen === undefined || seen.entry.version <= entry.version) this.#fallback.set(key, { entry, raw });
  }

  /** An invalidation of `key` reached this process: what it kept for the key must reflect it. */
  #forgetInvalidated(key: string, mode: InvalidationMode, version: number): void {
    const seen = this.#fallback?.get(key);
    if (seen === undefined || seen.entry.version >= version) return;
    if (mode === 'delete') this.#fallback?.delete(key);
    else this.#fallback?.set(key, { entry: markedStale(seen.entry, version), raw: undefined });
  }

  /** Redis could not answer: the envelope seen last, if any, else the error. Foreign data reads as corrupt. */
  #fallbackFor(key: string, error: unknown): StoreSnapshot {
    if (isWrongType(error)) return { entry: CORRUPT_ENTRY, version: 0 };
    const seen = this.#fallback?.get(key);
    if (seen !== undefined) return snapshotOf(seen.entry);
    throw error;
  }

  #encode(key: string, entry: Entry): string {
    try {
      return encodeEntry(entry);
    } catch (error) {
      throw new SerializationError(key, error);
    }
  }

  #indexKey(index: KeyIndex): string {
    return 'tag' in index ? this.keys.tag(index.tag) : this.keys.dependents(index.inputOf);
  }

  /** This process changed `key`: reads still out may predate it, and a primed envelope is outdated. */
  #changed(key: string): void {
    this.#reads.delete(key);
    this.#primed.delete(key);
    this.#signals.notify(key);
  }

  /**
   * Another process (or this one) changed a key. A read of the key still out may predate it, so
   * later reads send a new one; what this process kept for the key follows the change; a follower
   * waiting for the key gets the envelope from the message itself when it came with one.
   */
  #onMessage(message: string): void {
    const notice = decodeFillMessage(message);
    if (notice === undefined) return;
    const { key, envelope, kind, version } = notice;
    this.#reads.delete(key);
    this.#primed.delete(key);
    if (kind === 'stale' || kind === 'delete') this.#forgetInvalidated(key, kind, version);
    if (envelope !== undefined) {
      const entry = decodeEntry(envelope);
      if (entry !== undefined) {
        this.#remember(key, entry, envelope);
        if (this.#signals.has(key)) {
          if (this.#primed.size >= MAX_PRIMED) this.#primed.clear();
          this.#primed.set(key, { entry, receivedAt: Date.now() });
        }
      }
    }
    this.#signals.notify(key);
  }
}

/** A snapshot of a key known only by its envelope (the version is at least the envelope's). */
function snapshotOf(entry: Entry): StoreSnapshot {
  return { entry, version: entry.version };
}

function entryVersion(entry: StoreRead): number {
  return entry === undefined || entry === CORRUPT_ENTRY ? 0 : entry.version;
}

function connect(options: RedisStoreOptions): Redis | Cluster {
  if (options.cluster !== undefined) {
    const nodes = options.cluster.nodes.map((node) =>
      typeof node === 'string' ? node : { host: node.host, port: node.port },
    );
    return new Cluster(nodes, {
      enableOfflineQueue: false,
      clusterRetryStrategy: (attempt: number) => Math.min(50 * 2 ** attempt, 2_000),
      ...options.cluster.options,
      redisOptions: { ...CONNECTION_DEFAULTS, ...options.cluster.options?.redisOptions },
    });
  }
  const settings = { ...CONNECTION_DEFAULTS, ...options.redisOptions };
  return options.url === undefined ? new Redis(settings) : new Redis(options.url, settings);
}

function defineCommands(client: Redis | Cluster): Client {
  client.defineCommand('herdGuardAcquire', { numberOfKeys: 3, lua: ACQUIRE_LEASE });
  client.defineCommand('herdGuardFill', { numberOfKeys: 3, lua: FILL });
  client.defineCommand('herdGuardSet', { numberOfKeys: 3, lua: SET_VALUE });
  client.defineCommand('herdGuardInvalidate', { numberOfKeys: 3, lua: INVALIDATE });
  client.defineCommand('herdGuardRelease', { numberOfKeys: 1, lua: RELEASE_LEASE });
  client.defineCommand('herdGuardExtend', { numberOfKeys: 1, lua: EXTEND_LEASE });
  client.defineCommand('herdGuardIndex', { numberOfKeys: 1, lua: ADD_TO_INDEX });
  return client as Client;
}

/** A dedicated connection for SUBSCRIBE; unlike command connections it may queue until connected. */
function subscriberFor(client: Redis | Cluster): Redis | Cluster {
  if (client instanceof Cluster) return client.duplicate(undefined, { enableOfflineQueue: true });
  return client.duplicate({ enableOfflineQueue: true, disconnectTimeout: 200 });
}

async function closeConnection(connection: Redis | Cluster): Promise<void> {
  if (connection.status === 'end') return;
  try {
    if (connection.status !== 'ready') throw new Error('not connected');
    await Promise.race([connection.quit(), new Promise((_, reject) => setTimeout(reject, 1_000).unref())]);
  } catch {
    connection.disconnect();
  }
}

function validate(options: RedisStoreOptions): void {
  const sources = [options.url, options.client, options.cluster].filter((source) => source !== undefined);
  if (sources.length > 1) throw new ConfigurationError('redis', 'give only one of url, client and cluster');
  if (options.redisOptions !== undefined && (options.client !== undefined || options.cluster !== undefined)) {
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
  const threshold = options.breakerThreshold;
  if (threshold !== undefined && (!Number.isInteger(threshold) || threshold < 1)) {
    throw new ConfigurationError('redis.breakerThreshold', `expected a positive integer, received ${threshold}`);
  }
  const fallback = options.fallbackEntries;
  if (fallback !== undefined && (!Number.isInteger(fallback) || fallback < 0)) {
    throw new ConfigurationError('redis.fallbackEntries', `expected an integer >= 0, received ${fallback}`);
  }
  if (options.commandTimeout !== undefined && parseDuration(options.commandTimeout, 'redis.commandTimeout') <= 0) {
    throw new ConfigurationError('redis.commandTimeout', 'must be greater than 0');
  }
}

function isReplyError(error: unknown): boolean {
  return error instanceof Error && error.name === 'ReplyError';
}

function isWrongType(error: unknown): boolean {
  const cause = error instanceof StoreError ? error.cause : error;
  return isReplyError(cause) && (cause as Error).message.startsWith('WRONGTYPE');
}

function describe(error: unknown): string | undefined {
  if (error === undefined) return undefined;
  return error instanceof Error ? error.message : String(error);
}
