import { randomBytes } from 'node:crypto';
import { Cluster, Command } from 'ioredis';
import { ClusterNodeErrors } from './cluster-node-errors.js';
import { parseTimerDuration } from '../../core/duration.js';
import {
  type Entry,
  decodeEntry,
  encodeEntry,
  lifetimeLeftMs,
  withVersion,
} from '../../core/entry.js';
import { HEDGE_MIN, HEDGE_REPORT_MS, LOADS_PER_HEDGE } from '../../core/hedge-budget.js';
import { SerializationError } from '../../errors/serialization.error.js';
import { FillSignals } from '../fill-signals.js';
import {
  type AcquireOptions,
  CORRUPT_ENTRY,
  type FillWatch,
  type HedgeRequest,
  type HerdStore,
  INVALIDATIONS_KEPT_MS,
  type InvalidationMode,
  type InvalidationResult,
  type KeyIndex,
  type Lease,
  type LeaseAttempt,
  type LeaseEnd,
  type LoadOutcome,
  type SharedFailure,
  type StoreHealth,
  type StoreRead,
  type StoreSnapshot,
} from '../../core/herd-store.interface.js';
import { CommandGate } from './command-gate.js';
import { EvictionPolicyCheck } from './eviction-policy.js';
import { decodeFillMessage, decodeLaterFormat, isClearMessage } from './fill-message.js';
import { HEARTBEAT_INTERVAL_MS, Heartbeat } from './heartbeat.js';
import { NotificationSubscriber } from './notification-subscriber.js';
import {
  type Client,
  closeConnection,
  connect,
  defineCommands,
  describeError,
  isWrongType,
  keySpaceOf,
  validateStoreOptions,
} from './redis-connection.js';
import { RedisKeys } from './redis-keys.js';
import { ReplicaAcks } from './replica-acks.js';
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
  SETTLE_READ,
  SET_VALUE,
  type ScriptTarget,
} from './redis-scripts.js';
import type { RedisStoreOptions } from './redis-store.options.js';
import { NEAR_CACHE_DEFAULTS, NearCache, type NearCacheReport } from './near-cache.js';

export { HEARTBEAT_INTERVAL_MS } from './heartbeat.js';

/**
 * How long a read waits for Redis while the near cache is not trusted (notifications late) before
 * a copy of the key, if one is held, answers it as stale.
 */
export const STALE_COPY_PATIENCE_MS = 10;

/** Clear markers written at once (a Cluster has one per slot: 16,384). */
const CLEAR_CONCURRENCY = 512;

/** How long the key the breaker's probe writes lives. */
const PROBE_KEY_TTL_MS = 10_000;

/**
 * The store for many processes: envelopes, versions, leases and notifications in Redis (standalone
 * or Cluster), with a near cache: copies of envelopes in process memory, kept coherent by the
 * notifications, that answer hits without a round trip while the subscription is known to be live
 * (its own heartbeat comes back in time, see Heartbeat). While Redis is unreachable or slow it
 * answers from the copies (as stale), fails fast behind a circuit breaker that probes in the
 * background, and reports itself degraded; it recovers by itself, with or without traffic.
 */
export class RedisStore implements HerdStore {
  readonly name = 'redis';
  readonly keys: RedisKeys;
  readonly #client: Client;
  readonly #subscriber: NotificationSubscriber;
  /**
   * True when herd-guard opened `#client` (and so must close it). The subscriber is always ours.
   */
  readonly #ownsClient: boolean;
  readonly #signals = new FillSignals();
  readonly #gate: CommandGate;
  /**
   * How long a lease is first granted for, before its owner's first extension: a lease whose
   * acquire timed out on this side (it may still run on Redis) lapses after this, unheld.
   */
  readonly #firstLeaseMs: number;
  readonly #near: NearCache;
  /** Whether hits may be answered from the near cache (`nearCache` not `false`). */
  readonly #nearHits: boolean;
  /** Whether notifications are recent enough for the copies to answer hits. */
  readonly #heartbeat: Heartbeat;
  /** Reads asked of this store, and how many a near-cache copy answered (for the hit ratio). */
  readonly #nearCounts = { reads: 0, hits: 0 };
  /** Whether Redis may evict the indexes invalidation depends on. */
  readonly #eviction: EvictionPolicyCheck;
  /** Sends the writes invalidation depends on, and waits for replicas to confirm them. */
  readonly #acks: ReplicaAcks;
  /** On a Cluster: masters whose connection keeps failing (health). */
  readonly #nodeErrors: ClusterNodeErrors | undefined;
  /**
   * Per key, the MGET out and the one the readers that came since wait for (see {@link #readOf}).
   */
  readonly #reads = new Map<string, KeyReads>();
  /** When a clear was last made or heard here (`performance.now()`), see {@link #onMessage}. */
  #clearHeardAt = Number.NEGATIVE_INFINITY;
  #closed = false;

  constructor(options: RedisStoreOptions = {}) {
    validateStoreOptions(options);
    const commandTimeoutMs = parseTimerDuration(
      options.commandTimeout ?? '500ms',
      'redis.commandTimeout',
    );
    this.#firstLeaseMs = 2 * commandTimeoutMs;
    const cooldownMs = parseTimerDuration(options.breakerCooldown ?? '2s', 'redis.breakerCooldown');
    // The probe writes: a replica, a node out of memory or loading answers PING but refuses it.
    this.#gate = new CommandGate(commandTimeoutMs, options.breakerThreshold ?? 5, cooldownMs, () =>
      this.#client.set(this.keys.probe, '1', 'PX', PROBE_KEY_TTL_MS),
    );
    // Redis answers again: what this process loaded without its word meanwhile goes.
    this.#gate.onRecovered(() => this.#near.dropLocal());
    const near = options.nearCache ?? true;
    this.#nearHits = near !== false;
    this.#near = new NearCache(typeof near === 'object' ? near : NEAR_CACHE_DEFAULTS);
    this.#ownsClient = options.client === undefined;
    this.#client = defineCommands(options.client ?? connect(options));
    this.keys = new RedisKeys(options.namespace ?? 'hg', keySpaceOf(this.#client));
    this.#nodeErrors =
      this.#client instanceof Cluster ? new ClusterNodeErrors(this.#client, cooldownMs) : undefined;
    this.#acks = new ReplicaAcks(
      this.#client,
      options.waitForReplicas ?? 0,
      Math.max(1, Math.floor(commandTimeoutMs / 2)),
    );
    this.#eviction = new EvictionPolicyCheck(
      this.#client,
      commandTimeoutMs,
      options.evictionPolicy,
    );
    if (this.#ownsClient) this.#client.on('error', () => undefined);
    this.#subscriber = new NotificationSubscriber(
      this.#client,
      this.keys.channel,
      (message) => this.#onMessage(message),
      (sentAt) => this.#onSubscribed(sentAt),
    );
    this.#heartbeat = new Heartbeat(
      {
        publish: (message) =>
          this.#gate.run('heartbeat', undefined, () =>
            this.#client.publish(this.keys.channel, message),
          ),
        resubscribe: () => this.#subscriber.reconnect(),
      },
      HEARTBEAT_INTERVAL_MS + commandTimeoutMs,
      () => this.#subscriber.subscribed,
    );
  }

  /**
   * The near cache's keys and bytes now, whether it may answer hits, and the reads it answered
   * out of all reads since start (for tests and metrics).
   */
  get nearCache(): NearCacheReport {
    return {
      entries: this.#near.size,
      bytes: this.#near.bytes,
      trusted: this.#heartbeat.inTime(),
      reads: this.#nearCounts.reads,
      hits: this.#nearCounts.hits,
    };
  }

  /** Followers currently registered for fill notifications. */
  get watchers(): number {
    return this.#signals.size;
  }

  /**
   * Resolves when the command connection is ready, notifications are subscribed and the eviction
   * policy was checked, or after `timeoutMs` with `false`. It never rejects: a store may start
   * degraded and recover later.
   */
  async ready(timeoutMs = 2_000): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
    });
    const connected = new Promise<void>((resolve) => {
      if (this.#client.status === 'ready') return resolve();
      this.#client.once('ready', () => resolve());
    });
    try {
      const both = Promise.all([
        connected,
        this.#subscriber.whenSubscribed(),
        this.#eviction.whenChecked(),
      ]).then(() => true);
      return await Promise.race([both, timedOut]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * The key's copy when notifications are in time; otherwise one MGET of the envelope and the
   * version, joined by the readers of the key in the same tick.
   */
  get(key: string): StoreSnapshot | Promise<StoreSnapshot> {
    this.#nearCounts.reads += 1;
    const trusted = this.#nearHits && this.#heartbeat.inTime();
    // A hit on a trusted copy never leaves the process.
    if (trusted) {
      const copy = this.#near.hit(key);
      if (copy !== undefined) {
        this.#nearCounts.hits += 1;
        return copy;
      }
    }
    const read = this.#readOf(key);
    // Notifications are late: a copy at hand answers as stale if Redis is slow too.
    if (this.#nearHits && !trusted && this.#near.has(key)) return this.#patiently(key, read);
    return read;
  }

  /**
   * One MGET, never answered from a copy (see HerdStore.getAtStore), its value decoded from what
   * Redis sent (not the object other readers were handed, which one of them may have changed): it
   * shares only an MGET sent in this tick, so Redis runs it after the caller came; it rejects when
   * Redis does not answer.
   */
  getAtStore(key: string): Promise<StoreSnapshot> {
    const reads = this.#reads.get(key);
    return reads?.joinable === true ? reads.out.answer : this.#read(key, 'decode anew').answer;
  }

  /**
   * The read a reader of `key` gets. Readers in the tick that sent an MGET share it. A reader that
   * comes later must not take its answer: Redis may have run it before the reader came, so before
   * an invalidation that resolved meanwhile (on any pod). Such readers share the next MGET instead,
   * sent once the one out is answered: a key costs at most one MGET per round trip however many
   * read it, and every answer was read by Redis after its reader came.
   */
  #readOf(key: string): Promise<StoreSnapshot> {
    const reads = this.#reads.get(key);
    if (reads === undefined) return this.#read(key).orCopy;
    if (reads.joinable) return reads.out.orCopy;
    reads.next ??= reads.out.orCopy.then(
      () => this.#read(key).orCopy,
      () => this.#read(key).orCopy,
    );
    return reads.next;
  }

  /**
   * One MGET of the envelope and the version. Built as an ioredis Command so a late reply can be
   * rejected on the command itself: the gate's breaker and time limit without a wrapping promise.
   */
  #read(key: string, decode: 'reuse' | 'decode anew' = 'reuse'): Mget {
    const refusal = this.#gate.refusal('get', key);
    if (refusal !== undefined) return this.#orCopy(key, Promise.reject(refusal));
    const layout = this.keys.for(key);
    const command = new Command(
      'mget',
      [layout.value, layout.version, layout.cleared, layout.marker, layout.lease],
      { keyPrefix: this.#client.options.keyPrefix, replyEncoding: 'utf8' },
    );
    const pending = this.#gate.deadline('get', key, (error) => command.reject(error));
    const since = this.#near.mark();
    const answer: Promise<StoreSnapshot> = (
      command.promise as Promise<
        [string | null, string | null, string | null, string | null, string | null]
      >
    ).then(
      async ([mgetRaw, mgetVersion, cleared, marker, lease]) => {
        this.#gate.settled(pending);
        // A clear not applied to the key yet: a script applies it (revoking the lease and what it
        // held) and answers instead.
        const clearPending = isClearPending(cleared, marker);
        const [raw, version] = clearPending
          ? await this.#settleRead(key).finally(() => this.#answered(key, read))
          : (this.#answered(key, read), [mgetRaw, mgetVersion]);
        const entry = this.#near.decode(key, raw, since, Number(version ?? 0), decode === 'reuse');
        const snapshot: StoreSnapshot = {
          entry,
          version: Math.max(Number(version ?? 0), entryVersion(entry)),
        };
        const outcome = clearPending ? undefined : decodeOutcome(lease);
        return outcome === undefined ? snapshot : { ...snapshot, outcome };
      },
      (error: unknown) => {
        this.#answered(key, read);
        this.#gate.failed(pending, error);
        if (isWrongType(error)) return { entry: CORRUPT_ENTRY, version: 0 };
        throw this.#gate.wrap('get', key, error);
      },
    );
    const read = this.#orCopy(key, answer);
    const reads: KeyReads = { out: read, joinable: true };
    this.#reads.set(key, reads);
    queueMicrotask(() => (reads.joinable = false));
    this.#client.sendCommand(command);
    return read;
  }

  /** Applies a clear to `key` and reads it (see SETTLE_READ). */
  #settleRead(key: string): Promise<[string | null, string | null]> {
    const call = { layout: this.keys.for(key) };
    return this.#gate.run('get', key, () =>
      this.#client.herdGuardSettleRead(...SETTLE_READ.args(call)),
    );
  }

  /**
   * `answer`, and what a reader that may be answered from a copy gets when Redis cannot answer
   * (made when first asked for: nobody else handles its rejection).
   */
  #orCopy(key: string, answer: Promise<StoreSnapshot>): Mget {
    const fallback = (error: unknown): StoreSnapshot => this.#fallbackFor(key, error);
    let orCopy: Promise<StoreSnapshot> | undefined;
    return {
      answer,
      get orCopy(): Promise<StoreSnapshot> {
        return (orCopy ??= answer.catch(fallback));
      },
    };
  }

  /** The MGET `read` of `key` was answered: readers that come from now on send a new one. */
  #answered(key: string, read: Mget): void {
    if (this.#reads.get(key)?.out === read) this.#reads.delete(key);
  }

  /**
   * `read`, or the copy of `key` as stale if `read` takes longer than {@link
   * STALE_COPY_PATIENCE_MS}.
   */
  #patiently(key: string, read: Promise<StoreSnapshot>): Promise<StoreSnapshot> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        const entry = this.#near.fallback(key);
        if (entry !== undefined) resolve(snapshotOf(entry));
      }, STALE_COPY_PATIENCE_MS);
      read.then(resolve, reject).finally(() => clearTimeout(timer));
    });
  }

  async fill(key: string, entry: Entry, lease: Lease | undefined): Promise<boolean> {
    const envelope = this.#encode(key, entry);
    if (lease === undefined) {
      // Loaded without the store's word: this process's answer only while Redis cannot answer
      // (never a hit), and not kept at all if Redis answers again already.
      if (this.#gate.failing) this.#near.keepLocal(key, entry, envelope);
      return false;
    }
    const call = {
      target: this.#target(key),
      envelope,
      ttlMs: lifetimeLeftMs(entry),
      fence: lease.fence,
      token: lease.token,
    };
    const since = this.#near.mark();
    const written = await this.#gate.run('fill', key, () =>
      this.#client.herdGuardFill(...FILL.args(call)),
    );
    this.#changed(key);
    if (written !== 1) return false;
    this.#near.announce(key, lease.fence);
    this.#near.keep(key, entry, envelope, { since });
    return true;
  }

  async set(key: string, entry: Entry): Promise<number> {
    const envelope = this.#encode(key, entry);
    const call = { target: this.#target(key), envelope, ttlMs: lifetimeLeftMs(entry) };
    const since = this.#near.mark();
    const written = await this.#gate.run('set', key, () =>
      this.#acks.send('herdGuardSet', SET_VALUE.args(call)),
    );
    const version = Number(written.result);
    this.#changed(key);
    this.#acks.check('set', key, written.replicas);
    this.#near.announce(key, version);
    this.#near.keep(key, withVersion(entry, version), envelope, { raw: false, since });
    return version;
  }

  /**
   * Advances the version, revokes the lease, marks stale or deletes, and notifies every process.
   */
  async invalidate(key: string, mode: InvalidationMode): Promise<InvalidationResult> {
    const call = { target: this.#target(key), mode };
    const operation = mode === 'delete' ? 'delete' : 'mark-stale';
    const written = await this.#gate.run(operation, key, () =>
      this.#acks.send('herdGuardInvalidate', INVALIDATE.args(call)),
    );
    const [existed, version] = written.result;
    this.#changed(key);
    this.#near.invalidated(key, mode, Number(version));
    this.#acks.check(operation, key, written.replicas);
    return { existed: existed === 1, version: Number(version) };
  }

  /**
   * Records the clear in the marker (on a Cluster, in the marker of every slot, each in its slot),
   * then tells every process. Keys follow it as they are next touched (see SETTLE); the copies of
   * this process go at once, those of others when the notification arrives.
   */
  async clear(mode: InvalidationMode): Promise<void> {
    const markers = this.keys.markers();
    const last = markers.pop()!;
    try {
      for (let start = 0; start < markers.length; start += CLEAR_CONCURRENCY) {
        const batch = markers.slice(start, start + CLEAR_CONCURRENCY);
        const written = await Promise.all(
          batch.map((marker) =>
            this.#gate.run('clear', undefined, () => this.#writeMarker(marker, mode)),
          ),
        );
        for (const { replicas } of written) this.#acks.check('clear', undefined, replicas);
      }
      // The last marker is written once every other one is, with the notification in the same
      // step: a clear is never written everywhere without the other processes being told.
      const { replicas } = await this.#gate.run('clear', undefined, () =>
        this.#writeMarker(last, mode, this.keys.channel),
      );
      this.#acks.check('clear', undefined, replicas);
    } finally {
      // Even a clear that failed part way may have been applied to some keys: no copy here outlives
      // it.
      this.#onCleared();
    }
  }

  #writeMarker(marker: string, mode: InvalidationMode, channel?: string) {
    return this.#acks.send('herdGuardClear', CLEAR.args({ marker, mode, channel }));
  }

  async addToIndex(index: KeyIndex, key: string, ttlMs: number): Promise<void> {
    const call = { index: this.#indexKey(index), member: key, ttlMs };
    const written = await this.#gate.run('index', key, () =>
      this.#acks.send('herdGuardIndex', ADD_TO_INDEX.args(call)),
    );
    this.#acks.check('index', key, written.replicas);
  }

  async indexMembers(index: KeyIndex): Promise<string[]> {
    const indexKey = this.#indexKey(index);
    // Only a tag's invalidation is asked about (invalidatedWithin); it is acknowledged by the
    // replicas awaited, like the index it guards.
    const call = {
      index: indexKey,
      invalidatedAt: invalidatedAtKey(indexKey),
      keptMs: 'tag' in index ? INVALIDATIONS_KEPT_MS : 0,
    };
    const read = await this.#gate.run('index-members', undefined, () =>
      this.#acks.send('herdGuardIndexMembers', INDEX_MEMBERS.args(call)),
    );
    if ('tag' in index) this.#acks.check('index-members', undefined, read.replicas);
    return read.result;
  }

  /**
   * See {@link HerdStore.invalidatedWithin}. `withinMs` is measured here and Redis's time is read
   * with the last invalidation's, on the index's node: the call's own round trip (and the clock's
   * millisecond here) widens it, so no clocks are compared. Longer than Redis keeps the time
   * ({@link INVALIDATIONS_KEPT_MS}) cannot be told: `true`.
   */
  async invalidatedWithin(index: KeyIndex, withinMs: number): Promise<boolean> {
    if (withinMs >= INVALIDATIONS_KEPT_MS) return true;
    const call = { invalidatedAt: invalidatedAtKey(this.#indexKey(index)) };
    const sentAt = performance.now();
    const [nowUs, atUs] = await this.#gate.run('index-invalidated', undefined, () =>
      this.#client.herdGuardInvalidatedAt(...INVALIDATED_AT.args(call)),
    );
    const widenedMs = withinMs + (performance.now() - sentAt) + 1;
    if (widenedMs >= INVALIDATIONS_KEPT_MS) return true;
    return atUs >= 0 && atUs >= nowUs - widenedMs * 1_000;
  }

  /**
   * Tries for the lease. It is first granted for a short time ({@link #firstLeaseMs}) that the
   * owner's first extension lengthens: if this attempt times out here while it still runs on Redis,
   * the lease it took lapses soon, unheld, and is released as soon as the late reply arrives.
   */
  async acquireLease(
    key: string,
    ttlMs: number,
    options: AcquireOptions = {},
  ): Promise<LeaseAttempt> {
    const takeover = options.takeover ?? 'forced';
    // A lease taken over as stuck is marked in its token with the fence it took over from: it is
    // not
    // taken over as stuck again, and the holder it replaced may still store its value while it
    // holds.
    const rescue = options.takeoverFrom !== undefined && takeover === 'stuck';
    const token = `${rescue ? `s.${options.takeoverFrom}.` : ''}${randomBytes(16).toString('base64url')}`;
    const grantMs = Math.ceil(Math.min(ttlMs, this.#firstLeaseMs));
    const call = {
      layout: this.keys.for(key),
      token,
      ttlMs: grantMs,
      takeoverFrom: options.takeoverFrom,
      takeover,
    };
    const since = this.#near.mark();
    const [granted, version, raw, repaired, held] = await this.#gate.run(
      'acquire-lease',
      key,
      () => this.#client.herdGuardAcquire(...ACQUIRE_LEASE.args(call)),
      ([lateGranted, lateVersion]) => {
        if (lateGranted === 1)
          this.#releaseOrphan({ key, token, fence: Number(lateVersion), ttlMs: grantMs });
      },
    );
    const entry = this.#near.decode(key, raw, since, Number(version));
    const current: StoreSnapshot = {
      entry,
      version: Math.max(Number(version), entryVersion(entry)),
    };
    const outcome = decodeOutcome(held);
    const found = {
      current,
      ...(repaired === 1 ? { repaired: true } : {}),
      ...(outcome === undefined ? {} : { outcome }),
    };
    if (granted !== 1) return { lease: undefined, ...found };
    return { lease: { key, token, fence: Number(version), ttlMs: grantMs }, ...found };
  }

  async endLease(lease: Lease, end: LeaseEnd): Promise<boolean> {
    const { outcome } = end;
    const call = {
      target: this.#target(lease.key),
      token: lease.token,
      fence: lease.fence,
      kind: outcome.kind === 'pass' ? ('p' as const) : ('f' as const),
      holdMs: end.holdMs,
      rememberMs: end.rememberMs,
      failures: outcome.kind === 'failed' ? outcome.failures : 0,
      payload:
        outcome.kind === 'failed'
          ? JSON.stringify(outcome.failure)
          : outcome.entry === undefined
            ? ''
            : this.#encode(lease.key, outcome.entry),
    };
    const written = await this.#gate.run('release-lease', lease.key, () =>
      this.#client.herdGuardEndLease(...END_LEASE.args(call)),
    );
    return written === 1;
  }

  async hedge(request: HedgeRequest): Promise<boolean> {
    const call = {
      ...this.keys.hedges(),
      ...request,
      reportMs: HEDGE_REPORT_MS,
      loadsPerHedge: LOADS_PER_HEDGE,
      minimum: HEDGE_MIN,
    };
    const granted = await this.#gate.run('hedge', undefined, () =>
      this.#client.herdGuardHedge(...HEDGE.args(call)),
    );
    return granted === 1;
  }

  async extendLease(lease: Lease, ttlMs: number): Promise<boolean> {
    const call = { layout: this.keys.for(lease.key), token: lease.token, ttlMs };
    const extended = await this.#gate.run('extend-lease', lease.key, () =>
      this.#client.herdGuardExtend(...EXTEND_LEASE.args(call)),
    );
    return extended === 1;
  }

  async releaseLease(lease: Lease): Promise<void> {
    const call = { target: this.#target(lease.key), token: lease.token, fence: lease.fence };
    await this.#gate.run('release-lease', lease.key, () =>
      this.#client.herdGuardRelease(...RELEASE_LEASE.args(call)),
    );
  }

  watchFill(key: string): FillWatch {
    return this.#signals.watch(key);
  }

  /** See {@link HerdStore.onWarning}: here, an eviction policy that can evict indexes. */
  onWarning(listener: (warning: string) => void): () => void {
    return this.#eviction.onWarning(listener);
  }

  health(): StoreHealth {
    const health = this.#health();
    const warnings = this.#eviction.warnings;
    return warnings.length === 0 ? health : { ...health, warnings };
  }

  #health(): StoreHealth {
    const breaker = this.#gate.breaker.state;
    if (this.#closed) return { status: 'down', breaker, reason: 'closed' };
    // The node said why it cannot serve (a replica now, out of memory): the root cause of what
    // follows (the reconnect to find the primary, the open breaker).
    const refusedBy = this.#gate.refusedBy;
    if (refusedBy !== undefined)
      return { status: 'degraded', breaker, reason: `Redis refuses writes: ${refusedBy.message}` };
    if (breaker !== 'closed')
      return {
        status: 'degraded',
        breaker,
        reason: describeError(this.#gate.breaker.lastError) ?? 'breaker open',
      };
    if (this.#client.status !== 'ready')
      return { status: 'degraded', breaker, reason: `connection ${this.#client.status}` };
    const unreachable = this.#nodeErrors?.reason();
    if (unreachable !== undefined) return { status: 'degraded', breaker, reason: unreachable };
    if (!this.#subscriber.subscribed)
      return { status: 'degraded', breaker, reason: 'notifications not subscribed' };
    if (!this.#heartbeat.inTime())
      return { status: 'degraded', breaker, reason: 'notifications late' };
    return { status: 'up', breaker };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#heartbeat.stop();
    this.#signals.notifyAll();
    this.#gate.close();
    await Promise.all([
      this.#subscriber.close(),
      this.#ownsClient ? closeConnection(this.#client) : Promise.resolve(),
    ]);
  }

  /** A lease granted to an attempt that had already given up: let it go at once. */
  #releaseOrphan(lease: Lease): void {
    this.releaseLease(lease).catch(() => undefined);
  }

  /**
   * Redis could not answer: what this process saw last of the key: its copy (as stale, see
   * NearCache.fallback), or that it holds nothing since a change at a known version (a load that
   * began before that change is then not joined); else the error.
   */
  #fallbackFor(key: string, error: unknown): StoreSnapshot {
    const entry = this.#near.fallback(key);
    const version = this.#near.knownVersion(key);
    if (entry !== undefined) return { entry, version: Math.max(entry.version, version) };
    if (version > 0) return { entry: undefined, version };
    throw error;
  }

  #encode(key: string, entry: Entry): string {
    try {
      return encodeEntry(entry);
    } catch (error) {
      throw new SerializationError(key, error);
    }
  }

  /** What the scripts that change `key` are given: its Redis keys and the notification channel. */
  #target(key: string): ScriptTarget {
    return { key, layout: this.keys.for(key), channel: this.keys.channel };
  }

  #indexKey(index: KeyIndex): string {
    return 'tag' in index ? this.keys.tag(index.tag) : this.keys.dependents(index.inputOf);
  }

  /** This process changed `key`: reads still out may predate it; followers here may go on. */
  #changed(key: string): void {
    this.#reads.delete(key);
    this.#signals.notify(key);
  }

  /**
   * Subscribed (again): messages may have been missed, so copies are dropped and followers
   * re-check.
   */
  #onSubscribed(sentAt: number): void {
    this.#near.clear();
    this.#heartbeat.confirmed(sentAt);
    this.#signals.notifyAll();
  }

  /**
   * Another process (or this one) changed a key. A read of the key still out may predate it, so
   * later reads send a new one; the copy of the key follows the change (replaced by the envelope
   * the
   * message carries when a copy is held or a follower here waits for it, marked stale, or dropped);
   * followers of the key re-check.
   */
  #onMessage(message: string): void {
    if (this.#heartbeat.heard(message)) return;
    const notice = decodeFillMessage(message);
    if (notice === undefined) {
      if (isClearMessage(message)) return this.#onCleared();
      return this.#onLaterFormat(message);
    }
    const { key, envelope, kind, version } = notice;
    this.#reads.delete(key);
    if (kind === 'stale' || kind === 'delete') this.#near.invalidated(key, kind, version);
    else if (kind === 'fill' || kind === 'write') {
      const wanted = this.#near.has(key) || this.#signals.has(key);
      // Soon after a clear, an envelope may be from before it: on a Cluster the notifications of
      // other slots travel through other nodes and may arrive after the clear's. Not kept then:
      // followers read Redis, which applies the clear.
      const nearClear = performance.now() - this.#clearHeardAt <= this.#heartbeat.boundMs;
      if (envelope === undefined || !wanted || nearClear) this.#near.replaced(key, version);
      else {
        this.#near.announce(key, version);
        const entry = this.#near.decode(key, envelope, undefined, version);
        // Not readable here (a later release's envelope): the copy it replaced must not answer.
        if (entry === undefined || entry === CORRUPT_ENTRY) this.#near.replaced(key, version);
      }
    }
    this.#signals.notify(key);
  }

  /**
   * Every key was cleared (here, or by another process): reads out may predate it, every copy goes
   * (a read sent before is not kept), and every follower re-checks.
   */
  #onCleared(): void {
    this.#clearHeardAt = performance.now();
    this.#reads.clear();
    this.#near.clear();
    this.#signals.notifyAll();
  }

  /**
   * A message of a later release's format: the key it names changed (its copy goes, its followers
   * re-check); if even that cannot be read, every copy goes. Anything else on the channel is not
   * ours, and is ignored.
   */
  #onLaterFormat(message: string): void {
    const later = decodeLaterFormat(message);
    if (later === undefined) return;
    if (later.change === undefined) {
      this.#reads.clear();
      this.#near.clear();
      this.#signals.notifyAll();
      return;
    }
    const { key, version } = later.change;
    this.#reads.delete(key);
    this.#near.replaced(key, version);
    this.#signals.notify(key);
  }
}

/** A snapshot of a key known only by its envelope (the version is at least the envelope's). */
/** Where the time of an index's last invalidation is kept: beside it, in its slot. */
function invalidatedAtKey(indexKey: string): string {
  return `${indexKey}:at`;
}

function snapshotOf(entry: Entry): StoreSnapshot {
  return { entry, version: entry.version };
}

/** One MGET of a key. */
interface Mget {
  /** What Redis answered; rejects when it did not answer. */
  readonly answer: Promise<StoreSnapshot>;
  /** The answer, or when Redis did not answer, the copy of the key as stale (else the error). */
  readonly orCopy: Promise<StoreSnapshot>;
}

/** The reads of one key (see `RedisStore.#readOf`). */
interface KeyReads {
  /** The MGET sent and not answered yet. */
  readonly out: Mget;
  /** Until the end of the tick that sent it: readers may share it. */
  joinable: boolean;
  /** The MGET sent once `out` is answered, for the readers that came after that tick. */
  next?: Promise<StoreSnapshot>;
}

/**
 * Whether the slot's clear marker (`<generation>:<deleted>`) is ahead of the generation the key
 * was last brought to: the key has a clear to apply.
 */
function isClearPending(cleared: string | null, marker: string | null): boolean {
  if (marker === null) return false;
  const generation = Number(marker.slice(0, marker.indexOf(':')));
  return generation > Number(cleared ?? 0);
}

function entryVersion(entry: StoreRead): number {
  return entry === undefined || entry === CORRUPT_ENTRY ? 0 : entry.version;
}

/**
 * The outcome record a lease key held (`o.<kind>.<fence>.<retryAtMs>.<failures>.<payload>`, see
 * OUTCOME in redis-scripts.ts), or `undefined` for anything else (a holder's token, nothing, a
 * record this release cannot read).
 */
export function decodeOutcome(held: string | null | undefined): LoadOutcome | undefined {
  if (typeof held !== 'string') return undefined;
  const match = /^o\.([pf])\.(\d+)\.\d+\.(\d+)\./.exec(held);
  if (match === null) return undefined;
  const fence = Number(match[2]);
  const payload = held.slice(match[0].length);
  if (match[1] === 'p') {
    const entry = payload === '' ? undefined : decodeEntry(payload);
    return { kind: 'pass', fence, entry };
  }
  const failure = decodeFailure(payload);
  if (failure === undefined) return undefined;
  return { kind: 'failed', fence, failures: Number(match[3]), failure };
}

function decodeFailure(payload: string): SharedFailure | undefined {
  try {
    const parsed: unknown = JSON.parse(payload);
    if (typeof parsed !== 'object' || parsed === null) return undefined;
    const { name, message, timeoutMs } = parsed as Record<string, unknown>;
    if (typeof name !== 'string' || typeof message !== 'string') return undefined;
    return typeof timeoutMs === 'number' && timeoutMs > 0
      ? { name, message, timeoutMs }
      : { name, message };
  } catch {
    return undefined;
  }
}
