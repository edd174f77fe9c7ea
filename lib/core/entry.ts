/** Format version written into every envelope; envelopes of another version are treated as absent. */
export const ENTRY_FORMAT_VERSION = 1;

/**
 * A cached value wrapped with its timing. Before `softExpireAt` it is fresh; from `softExpireAt`
 * until `hardExpireAt` it is stale but servable; from `hardExpireAt` on it is never served.
 * A `value` of `null` or `undefined` is a cached "not found" (negative entry).
 */
export interface Entry<T = unknown> {
  readonly value: T;
  /** Epoch ms when the value was loaded. */
  readonly createdAt: number;
  readonly softExpireAt: number;
  readonly hardExpireAt: number;
  /** How long the load took, in ms (the `delta` of probabilistic early refresh). */
  readonly loadMs: number;
  /** Tags the value was stored with, for group invalidation. */
  readonly tags?: readonly string[];
}

export function isNegative(entry: Entry): boolean {
  return entry.value === null || entry.value === undefined;
}

export function isFresh(entry: Entry, now: number): boolean {
  return now < entry.softExpireAt;
}

/** Fresh or stale: may be returned to a caller. */
export function isServable(entry: Entry, now: number): boolean {
  return now < entry.hardExpireAt;
}

/**
 * Returns a copy whose soft expiry is `now` (or earlier), so the next read is stale and revalidates.
 * Its `createdAt` moves up to `now`: a load that started before the invalidation is older than it
 * and may not overwrite it (it would store pre-invalidation data as fresh).
 */
export function markedStale<T>(entry: Entry<T>, now: number): Entry<T> {
  return { ...entry, createdAt: Math.max(entry.createdAt, now), softExpireAt: Math.min(entry.softExpireAt, now) };
}

/** The wire form of an envelope: short field names, since it is stored once per key. */
interface WireEntry {
  v: number;
  c: number;
  s: number;
  h: number;
  d: number;
  /** 1 when the value was `undefined` (JSON has no undefined). */
  u?: 1;
  x?: unknown;
  t?: string[];
}

/** Serialises an envelope to JSON. Throws what JSON.stringify throws (BigInt, cycles). */
export function encodeEntry(entry: Entry): string {
  const wire: WireEntry = {
    v: ENTRY_FORMAT_VERSION,
    c: entry.createdAt,
    s: entry.softExpireAt,
    h: entry.hardExpireAt,
    d: entry.loadMs,
  };
  if (entry.value === undefined) wire.u = 1;
  else wire.x = entry.value;
  if (entry.tags !== undefined && entry.tags.length > 0) wire.t = [...entry.tags];
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

function fromWire(wire: WireEntry): Entry {
  const entry: { -readonly [K in keyof Entry]: Entry[K] } = {
    value: wire.u === 1 ? undefined : wire.x,
    createdAt: wire.c,
    softExpireAt: wire.s,
    hardExpireAt: wire.h,
    loadMs: wire.d,
  };
  if (wire.t !== undefined) entry.tags = wire.t;
  return entry;
}

function isWireEntry(candidate: unknown): candidate is WireEntry {
  if (typeof candidate !== 'object' || candidate === null || Array.isArray(candidate)) return false;
  const wire = candidate as Record<string, unknown>;
  if (wire['v'] !== ENTRY_FORMAT_VERSION) return false;
  const { c, s, h, d } = wire;
  if (!isTime(c) || !isTime(s) || !isTime(h) || !isTime(d)) return false;
  if (s > h) return false;
  if (wire['u'] !== undefined && wire['u'] !== 1) return false;
  if (wire['u'] === undefined && !('x' in wire)) return false;
  const tags = wire['t'];
  if (tags !== undefined && !(Array.isArray(tags) && tags.every((tag) => typeof tag === 'string'))) return false;
  return true;
}

function isTime(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0;
}
