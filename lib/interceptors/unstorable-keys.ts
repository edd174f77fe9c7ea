/** The most keys remembered: past it, the oldest window is forgotten (its key is tried again). */
const MAX_KEYS = 1000;

/**
 * The keys whose last response the serializer refused, each until its window ends: their requests
 * pass through without a read, so a route that always answers such a body costs one attempt to
 * store it (and one report) per key and window, not one per request. Written by the interceptor
 * alone, as it finds a refused body.
 */
export class UnstorableKeys {
  /** Key → when its window ends (epoch ms), oldest first. */
  readonly #until = new Map<string, number>();

  /** Whether `key` is within its window; a key whose window is over is forgotten. */
  has(key: string): boolean {
    const until = this.#until.get(key);
    if (until === undefined) return false;
    if (Date.now() < until) return true;
    this.#until.delete(key);
    return false;
  }

  /** Passes the requests of `key` through for `windowMs`. */
  add(key: string, windowMs: number): void {
    this.#until.delete(key);
    if (this.#until.size >= MAX_KEYS) {
      const oldest = this.#until.keys().next();
      if (oldest.done !== true) this.#until.delete(oldest.value);
    }
    this.#until.set(key, Date.now() + windowMs);
  }
}
