import type { KeyIndex } from '../herd-store.interface.js';

/**
 * The memory store's indexes (keys by tag, keys derived from an input): each member is kept until
 * its deadline. Expired members are dropped when the index is read or, as it grows, on insert, so
 * an index holds at most the members added within their lifetime.
 */
export class KeyIndexes {
  /** Index name -> member key -> until (epoch ms). */
  readonly #indexes = new Map<string, Map<string, number>>();

  constructor(private readonly now: () => number) {}

  add(index: KeyIndex, key: string, untilMs: number): void {
    const name = indexName(index);
    let members = this.#indexes.get(name);
    if (members === undefined) {
      members = new Map();
      this.#indexes.set(name, members);
    }
    members.set(key, Math.max(untilMs, members.get(key) ?? 0));
    // Power-of-two sizes trigger a sweep: amortised O(1) per insert.
    if ((members.size & (members.size - 1)) === 0 && members.size >= 64) this.#sweep(name, members);
  }

  members(index: KeyIndex): string[] {
    const name = indexName(index);
    const members = this.#indexes.get(name);
    if (members === undefined) return [];
    this.#sweep(name, members);
    return [...members.keys()];
  }

  clear(): void {
    this.#indexes.clear();
  }

  #sweep(name: string, members: Map<string, number>): void {
    const now = this.now();
    for (const [key, untilMs] of members) if (untilMs <= now) members.delete(key);
    if (members.size === 0) this.#indexes.delete(name);
  }
}

function indexName(index: KeyIndex): string {
  return 'tag' in index ? `t:${index.tag}` : `i:${index.inputOf}`;
}
