import { type ResolvedPolicy, expiryFor } from './policy.js';
import { type SerializerName, decodeValue, encodeValue } from './serializers.js';

/**
 * Format version written into every envelope. An envelope of a later format (a newer release wrote
 * it during a rolling deploy) reads as absent, and this release never overwrites it with a load
 * (see {@link isLaterFormat}); one of an earlier or unknown format reads as corrupt.
 */
export const ENTRY_FORMAT_VERSION = 2;

/** The format an envelope declares in its first field (`{"v":<format>,`), if any. */
export function envelopeFormat(raw: string): number | undefined {
  const match = /^\{"v":(\d{1,9}),/.exec(raw);
  return match === null ? undefined : Number(match[1]);
}

/** True for an envelope of a format later than this release writes (a newer release wrote it). */
export function isLaterFormat(raw: string): boolean {
  return (envelopeFormat(raw) ?? 0) > ENTRY_FORMAT_VERSION;
}

/**
 * A cached value wrapped with its timing and version. Before `softExpireAt` it is fresh (unless
 * invalidated); from `softExpireAt` until `hardExpireAt` it is stale but servable; from
 * `hardExpireAt` on it is never served. A `value` of `null` or `undefined` is a cached "not found"
 * (negative entry).
 */
export interface Entry<T = unknown> {
  readonly value: T;
  /**
   * The key's version this value belongs to, assigned by the store (never by a clock): the fence of
   * the lease its load held, or the version of the `set()`/`expire()` that wrote it. Entries and
   * invalidations of a key are ordered by it.
   */
  readonly version: number;
  /**
   * Marked stale by an invalidation (`expire()`, a tag, or an input it was derived from): never
   * fresh again.
   */
  readonly invalidated?: boolean;
  /**
   * Epoch ms (the loading pod's clock) when the value was loaded. Only for `Age` and TTLs, never
   * for ordering.
   */
  readonly createdAt: number;
  readonly softExpireAt: number;
  readonly hardExpireAt: number;
  /**
   * How long the load took, in ms (the `delta` of probabilistic early refresh); 0 for a value
   * written with set(), at least {@link SHORTEST_LOAD_MS} for a loaded one.
   */
  readonly loadMs: number;
  /** Tags the value was stored with, for group invalidation. */
  readonly tags?: readonly string[];
  /** How the value is stored on a shared store (default `json`). */
  readonly encoding?: SerializerName;
}

export function isNegative(entry: Entry): boolean {
  return entry.value === null || entry.value === undefined;
}

export function isFresh(entry: Entry, now: number): boolean {
  return entry.invalidated !== true && now < entry.softExpireAt;
}

/**
 * Stale from the moment it was stored: invalidated, derived from a stale input, or loaded more
 * slowly than its soft TTL. The caller of such a load is answered `stale`, not `miss`.
 */
export function isBornStale(entry: Entry): boolean {
  if (entry.invalidated === true) return true;
  return !isNegative(entry) && entry.softExpireAt <= entry.createdAt + entry.loadMs;
}

/** Fresh or stale: may be returned to a caller. */
export function isServable(entry: Entry, now: number): boolean {
  return now < entry.hardExpireAt;
}

/** True when `entry` is a newer version of the key than `than`. */
export function isNewer(entry: Entry, than: Entry | undefined): boolean {
  return than === undefined || entry.version > than.version;
}

/** The newest (by version) of two entries that may still be served at `now`. */
export function newestServable(
  a: Entry | undefined,
  b: Entry | undefined,
  now: number,
): Entry | undefined {
  const servableA = a !== undefined && isServable(a, now) ? a : undefined;
  const servableB = b !== undefined && isServable(b, now) ? b : undefined;
  if (servableA === undefined) return servableB;
  if (servableB === undefined) return servableA;
  return servableB.version > servableA.version ? servableB : servableA;
}

/**
 * How long the entry had left until its hard expiry when it was made (its hard TTL from the end of
 * its load), measured on the clock of the pod that made it: stores expire it after this long, so
 * no two pods' clocks are ever compared for it.
 */
export function lifetimeLeftMs(entry: Entry): number {
  return Math.max(1, Math.ceil(entry.hardExpireAt - entry.createdAt - entry.loadMs));
}

/** The bounds a value derived from other keys takes from them (what its loader read). */
export interface InputBounds {
  /** Earliest soft expiry among the inputs. */
  readonly softBoundMs: number;
  /** Earliest hard expiry among the inputs. */
  readonly hardBoundMs: number;
  /** An input's link could not be recorded: its invalidation would not reach the value. */
  readonly untracked: boolean;
}

/**
 * The load time (ms) of a value loaded within one millisecond of the clock: a loaded value's load
 * time is never 0, which marks a value written with set().
 */
export const SHORTEST_LOAD_MS = 0.001;

/** What a new entry is made of. */
export interface EntrySource<T> {
  readonly value: T;
  readonly policy: ResolvedPolicy;
  /** Random source for the TTL jitter. */
  readonly random: () => number;
  /**
   * When the load started: the data is at least that old, so TTLs count from there. `undefined` for
   * a value written with set(), which carries no load time.
   */
  readonly loadStartedAt: number | undefined;
  readonly now: number;
  /** The key's version the value was loaded (or written) under. */
  readonly version: number;
  readonly tags: readonly string[] | undefined;
  readonly inputs?: InputBounds;
  /**
   * The key could not be recorded under its tags: a tag invalidation would not reach the value, so
   * it is stored stale (refreshed, and indexed, at its next read).
   */
  readonly unindexed?: boolean;
}

/**
 * The envelope of a loaded (or written) value. A value derived from other keys expires no later
 * than they do, and is stored already stale when one of them was stale or could not be tracked, or
 * when the value could not be recorded under its tags.
 */
export function newEntry<T>(source: EntrySource<T>): Entry<T> {
  const { value, policy, loadStartedAt, now, tags, inputs } = source;
  const negative = value === null || value === undefined;
  const createdAt = loadStartedAt === undefined ? now : Math.min(loadStartedAt, now);
  const expiry = expiryFor(policy, createdAt, negative, source.random);
  const hardExpireAt = Math.min(
    expiry.hardExpireAt,
    inputs?.hardBoundMs ?? Number.POSITIVE_INFINITY,
  );
  const entry: { -readonly [K in keyof Entry<T>]: Entry<T>[K] } = {
    value,
    version: source.version,
    createdAt,
    softExpireAt: Math.min(
      expiry.softExpireAt,
      inputs?.softBoundMs ?? Number.POSITIVE_INFINITY,
      hardExpireAt,
    ),
    hardExpireAt,
    // 0 only for a written value: a load within one millisecond of the clock still counts as a load
    // (how long loads of the key usually take, see LoadDurations).
    loadMs: loadStartedAt === undefined ? 0 : Math.max(SHORTEST_LOAD_MS, now - loadStartedAt),
  };
  if (inputs?.untracked === true || source.unindexed === true) entry.invalidated = true;
  if (tags !== undefined && tags.length > 0) entry.tags = [...tags];
  if (policy.serializer === 'v8') entry.encoding = 'v8';
  return entry;
}

/** A copy marked stale by the invalidation that gave the key `version`. */
export function markedStale<T>(entry: Entry<T>, version: number): Entry<T> {
  return { ...entry, version, invalidated: true };
}

/** A copy carrying `version` (the store assigns it to a written value). */
export function withVersion<T>(entry: Entry<T>, version: number): Entry<T> {
  return entry.version === version ? entry : { ...entry, version };
}

/**
 * The wire form of an envelope: short field names, since it is stored once per key. The header
 * `{"v":2,"n":<version>,"i":<0|1>,` always comes first and in this order, so the Redis scripts can
 * rewrite the version and the invalidated flag without parsing the value: `withHeader` in
 * ENVELOPE_HEADER (lib/stores/redis/redis-scripts.ts) matches exactly this header; keep them in
 * step.
 */
interface WireEntry {
  v: number;
  n: number;
  i: 0 | 1;
  c: number;
  s: number;
  h: number;
  d: number;
  t?: string[];
  /** `v8` when `x` is the value serialised by v8, in base64; absent for a JSON value. */
  e?: 'v8';
  /** 1 when the value was `undefined` (JSON has no undefined). */
  u?: 1;
  x?: unknown;
}

/**
 * Serialises an envelope to JSON, its value with the entry's serializer. Throws
 * {@link UnserializableValue} (or what JSON.stringify throws) for a value it cannot hold.
 */
export function encodeEntry(entry: Entry): string {
  const wire: WireEntry = {
    v: ENTRY_FORMAT_VERSION,
    n: entry.version,
    i: entry.invalidated === true ? 1 : 0,
    c: entry.createdAt,
    s: entry.softExpireAt,
    h: entry.hardExpireAt,
    d: entry.loadMs,
  };
  if (entry.tags !== undefined && entry.tags.length > 0) wire.t = [...entry.tags];
  if (entry.value === undefined) wire.u = 1;
  else if (entry.encoding === 'v8' && entry.value !== null) {
    wire.e = 'v8';
    wire.x = encodeValue(entry.value, 'v8');
  } else wire.x = entry.value;
  return JSON.stringify(wire);
}

/**
 * Parses and validates an envelope. Anything malformed, foreign or of another format version
 * returns `undefined`; it never throws.
 */
export function decodeEntry(raw: unknown): Entry | undefined {
  let wire: unknown = raw;
  if (typeof raw === 'string' || Buffer.isBuffer(raw)) {
    try {
      wire = JSON.parse(raw.toString());
    } catch {
      return undefined;
    }
  }
  return isWireEntry(wire) ? fromWire(wire) : undefined;
}

function fromWire(wire: WireEntry): Entry | undefined {
  let value: unknown = wire.u === 1 ? undefined : wire.x;
  if (wire.e === 'v8') {
    try {
      value = decodeValue(wire.x as string, 'v8');
    } catch {
      return undefined;
    }
  }
  const entry: { -readonly [K in keyof Entry]: Entry[K] } = {
    value,
    version: wire.n,
    createdAt: wire.c,
    softExpireAt: wire.s,
    hardExpireAt: wire.h,
    loadMs: wire.d,
  };
  if (wire.i === 1) entry.invalidated = true;
  if (wire.t !== undefined) entry.tags = wire.t;
  if (wire.e === 'v8') entry.encoding = 'v8';
  return entry;
}

function isWireEntry(candidate: unknown): candidate is WireEntry {
  if (typeof candidate !== 'object' || candidate === null || Array.isArray(candidate)) return false;
  const wire = candidate as Record<string, unknown>;
  if (wire['v'] !== ENTRY_FORMAT_VERSION) return false;
  const { n, c, s, h, d } = wire;
  if (!isTime(n) || !Number.isInteger(n) || !isTime(c) || !isTime(s) || !isTime(h) || !isTime(d))
    return false;
  if (wire['i'] !== 0 && wire['i'] !== 1) return false;
  if (s > h) return false;
  if (wire['u'] !== undefined && wire['u'] !== 1) return false;
  if (wire['u'] === undefined && !('x' in wire)) return false;
  if (wire['e'] !== undefined && !(wire['e'] === 'v8' && typeof wire['x'] === 'string'))
    return false;
  const tags = wire['t'];
  if (tags !== undefined && !(Array.isArray(tags) && tags.every((tag) => typeof tag === 'string')))
    return false;
  return true;
}

function isTime(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0;
}
