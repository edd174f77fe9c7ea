import { createHash } from 'node:crypto';
import { CLUSTER_SLOTS, slotOfTag, tagOfSlot } from './cluster-slots.js';

/** Keys longer than this, or with braces or characters outside printable ASCII, are hashed. */
const MAX_PLAIN_KEY_LENGTH = 128;
const PLAIN_KEY = /^[\x20-\x7a\x7c\x7e]*$/; // printable ASCII except '{' (0x7b) and '}' (0x7d)

const NAMESPACE_PATTERN = /^[A-Za-z0-9._:-]{1,64}$/;

/**
 * A namespace is 1-64 characters from A-Z a-z 0-9 . _ : - (no braces: it must not change hash
 * slots).
 */
export function isValidNamespace(namespace: unknown): namespace is string {
  return typeof namespace === 'string' && NAMESPACE_PATTERN.test(namespace);
}

/**
 * Where one cache key lives in Redis. Value, lease, version and cleared share a hash slot (`{...}`
 * tag), and so does the clear marker the key follows (its own tag, chosen for that slot).
 */
export interface RedisKeyLayout {
  readonly value: string;
  readonly lease: string;
  readonly version: string;
  /** The generation of the last `clear()` applied to the key (absent until one was). */
  readonly cleared: string;
  /** The clear marker of the key's slot: the generation of the last `clear()` (see clear()). */
  readonly marker: string;
}

/** Where a store's keys live besides its namespace: its client's database and key prefix. */
export interface KeySpace {
  /** The database the client selected (always 0 on Redis Cluster). Default 0. */
  readonly db?: number;
  /** ioredis's `keyPrefix`, which ioredis puts before every key but not before channels. */
  readonly keyPrefix?: string;
  /**
   * Whether keys are spread over a Cluster's slots: then each slot has its own clear marker, in
   * that slot (a script reads it with the key). Default false: one marker.
   */
  readonly cluster?: boolean;
}

/**
 * Maps cache keys to Redis keys: `ns:{key}:v` (envelope), `ns:{key}:l` (lease), `ns:{key}:n`
 * (version), `ns:{key}:c` (the last clear applied to it), `ns:d:{key}` (keys derived from it) and
 * `ns:t:{tag}` (keys stored with a tag); the clear marker is `ns:c`, on a Cluster one per slot,
 * `ns:c:{<tag of the slot>}`. Any string works: odd or long keys are replaced by a SHA-256 digest.
 */
export class RedisKeys {
  /**
   * The notification channel of this key space: Redis pub/sub ignores the database, and ioredis
   * does not prefix channels, so both are named in it. On database 0 without a prefix it is
   * `ns:fill`, the channel of the previous release (pods of both hear each other during a rolling
   * deploy).
   */
  readonly channel: string;
  /** The key the circuit breaker's probe writes (a write: a replica answers reads too). */
  readonly probe: string;

  readonly #cluster: boolean;

  constructor(
    readonly namespace: string,
    space: KeySpace = {},
  ) {
    this.#cluster = space.cluster ?? false;
    const db = space.db ?? 0;
    this.channel = `${space.keyPrefix ?? ''}${namespace}:fill${db === 0 ? '' : `:db${db}`}`;
    this.probe = `${namespace}:probe`;
  }

  for(key: string): RedisKeyLayout {
    const slot = slotTag(key);
    const base = `${this.namespace}:{${slot}}`;
    return {
      value: `${base}:v`,
      lease: `${base}:l`,
      version: `${base}:n`,
      cleared: `${base}:c`,
      marker: this.#cluster ? this.#marker(slotOfTag(slot)) : `${this.namespace}:c`,
    };
  }

  /** Every clear marker: one, or on a Cluster one per slot. */
  markers(): string[] {
    if (!this.#cluster) return [`${this.namespace}:c`];
    return Array.from({ length: CLUSTER_SLOTS }, (_, slot) => this.#marker(slot));
  }

  #marker(slot: number): string {
    return `${this.namespace}:c:{${tagOfSlot(slot)}}`;
  }

  /**
   * The hedge budget of the namespace: the asking processes' reports and the hedges that count, in one
   * slot (the `{#hedge}` tag is no plain key's, nor a digest's).
   */
  hedges(): { readonly reports: string; readonly granted: string } {
    return { reports: `${this.namespace}:{#hedge}:p`, granted: `${this.namespace}:{#hedge}:g` };
  }

  tag(tag: string): string {
    return `${this.namespace}:t:{${slotTag(tag)}}`;
  }

  /** The set of keys whose values were derived from `key`. */
  dependents(key: string): string {
    return `${this.namespace}:d:{${slotTag(key)}}`;
  }
}

function slotTag(key: string): string {
  // A key starting with '#' is hashed too, so no plain key can look like the digest of another.
  if (key.length <= MAX_PLAIN_KEY_LENGTH && !key.startsWith('#') && PLAIN_KEY.test(key)) return key;
  return `#${createHash('sha256').update(key).digest('base64url')}`;
}
