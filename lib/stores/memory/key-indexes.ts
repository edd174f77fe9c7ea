import { INVALIDATIONS_KEPT_MS, type KeyIndex } from '../../core/herd-store.interface.js';

/** At most this often (store clock), every index is swept of members past their deadline. */
const FULL_SWEEP_INTERVAL_MS = 60_000;

/**
 * The memory store's indexes (keys by tag, keys derived from an input): each member is kept until
 * its deadline. An index is swept when it is read, when it doubles in size, and every index is
 * swept
 * at most once a minute when the store is used ({@link maybeSweep}), so the indexes hold about the
 * members added within their lifetime, whether or not anybody reads them.
 */
export class KeyIndexes {
  /** Index name -> member key -> until (epoch ms). */
  readonly #indexes = new Map<string, Map<string, number>>();
  /**
   * Tag index name -> when its members were last read for an invalidation (`performance.now()`:
   * a duration measured by the engine is compared with it, whatever the wall clock does).
   */
  readonly #invalidatedAt = new Map<string, number>();
  #sweptAt: number;

  constructor(private readonly now: () => number) {
    this.#sweptAt = now();
  }

  add(index: KeyIndex, key: string, ttlMs: number): void {
    const untilMs = this.now() + ttlMs;
    const name = indexName(index);
    let members = this.#indexes.get(name);
    if (members === undefined) {
      members = new Map();
      this.#indexes.set(name, members);
    }
    members.set(key, Math.max(untilMs, members.get(key) ?? 0));
    // Power-of-two sizes trigger a sweep: amortised O(1) per insert.
    if ((members.size & (members.size - 1)) === 0 && members.size >= 64)
      this.#sweep(name, members, this.now());
    this.maybeSweep();
  }

  /**
   * The members of `index`, read for an invalidation: for a tag, when is noted (see
   * {@link invalidatedWithin}).
   */
  members(index: KeyIndex): string[] {
    const name = indexName(index);
    const now = this.now();
    if ('tag' in index) {
      this.#invalidatedAt.delete(name);
      this.#invalidatedAt.set(name, performance.now());
      this.#sweepInvalidations();
    }
    const members = this.#indexes.get(name);
    if (members === undefined) return [];
    this.#sweep(name, members, now);
    return [...members.keys()];
  }

  /**
   * Whether `index` was invalidated within the last `withinMs`, or may have been: a time longer
   * than {@link INVALIDATIONS_KEPT_MS} cannot be told.
   */
  invalidatedWithin(index: KeyIndex, withinMs: number): boolean {
    if (withinMs >= INVALIDATIONS_KEPT_MS) return true;
    const at = this.#invalidatedAt.get(indexName(index));
    return at !== undefined && at >= performance.now() - withinMs;
  }

  /** Sweeps every index if the last full sweep is a minute old or more. */
  maybeSweep(): void {
    const now = this.now();
    if (now - this.#sweptAt < FULL_SWEEP_INTERVAL_MS) return;
    this.#sweptAt = now;
    for (const [name, members] of this.#indexes) this.#sweep(name, members, now);
  }

  clear(): void {
    this.#indexes.clear();
    this.#invalidatedAt.clear();
  }

  /** Forgets invalidations older than kept: oldest first (re-inserted when noted). */
  #sweepInvalidations(): void {
    const keptFrom = performance.now() - INVALIDATIONS_KEPT_MS;
    for (const [name, at] of this.#invalidatedAt) {
      if (at > keptFrom) break;
      this.#invalidatedAt.delete(name);
    }
  }

  #sweep(name: string, members: Map<string, number>, now: number): void {
    for (const [key, untilMs] of members) if (untilMs <= now) members.delete(key);
    if (members.size === 0) this.#indexes.delete(name);
  }
}

function indexName(index: KeyIndex): string {
  return 'tag' in index ? `t:${index.tag}` : `i:${index.inputOf}`;
}
