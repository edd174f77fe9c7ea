import { UncacheableResponse } from './uncacheable-response.js';

/**
 * One cached request's part in the read of its key, written by the interceptor while that read
 * runs: whether the engine ran this request's own handler as the key's loader, and what that run
 * sent when it was not for sharing.
 */
export class RequestRead {
  #ranHere = false;
  #own: UncacheableResponse | undefined;

  /** The engine runs this request's handler as the key's loader (not another request's). */
  handlerStarted(): void {
    this.#ranHere = true;
  }

  /** That run failed: keeps the response it sent if it was one not for sharing. */
  handlerFailed(error: unknown): void {
    this.#own = error instanceof UncacheableResponse ? error : undefined;
  }

  /** Whether this request's own handler ran for the read. */
  get ranHere(): boolean {
    return this.#ranHere;
  }

  /** This request's own response, when its handler produced one that is not for sharing. */
  get own(): UncacheableResponse | undefined {
    return this.#own;
  }
}
