import type { ResponseHead } from './response-head.js';

/**
 * Runs of a handler whose entry is stored before the head of their own response is written: the
 * engine stores what the loader returns, and that response goes out only once it is answered from
 * the read. Until the head is out, a `Set-Cookie` added to it (a session middleware) may still show
 * the response belonged to one visitor. Requests of this process that would be answered from the
 * key meanwhile (joiners of the run, hits) wait for the verdict; the entry is dropped when the head
 * carried a cookie.
 */
export class HeadFences {
  /**
   * Per key, whether every run registered for it went out without a cookie. An entry lives until
   * its verdict.
   */
  readonly #pending = new Map<string, Promise<boolean>>();

  /**
   * Registers a run of `key` whose request's `head` is not written yet. When the head carries a
   * cookie, `drop` runs (removing the stored entry) before any waiting request learns the verdict.
   */
  add(key: string, head: ResponseHead, drop: () => Promise<void>): void {
    const verdict = head.written.then(async () => {
      if (!head.setCookie) return true;
      await drop();
      return false;
    });
    const previous = this.#pending.get(key);
    const all =
      previous === undefined ? verdict : Promise.all([previous, verdict]).then(([a, b]) => a && b);
    this.#pending.set(key, all);
    void all.then(() => {
      if (this.#pending.get(key) === all) this.#pending.delete(key);
    });
  }

  /**
   * Resolves whether what `key` holds may be served, once the pending runs' heads are out;
   * `undefined` (no wait) when no run of the key is pending, the usual case.
   */
  verdict(key: string): Promise<boolean> | undefined {
    return this.#pending.get(key);
  }
}
