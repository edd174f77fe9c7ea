import { isCachedResponse, replayedHeaders } from './cached-response.js';
import type { HttpResponse } from './http-response.js';

/** What the response held when a run of the handler started, to tell what the handler set. */
export interface RunBaseline {
  /** The response's headers before the run, by lower-case name. */
  readonly headers: Readonly<Record<string, string>>;
  /**
   * Whether the response was sent already (a refresh running after the request was answered from
   * the cache).
   */
  readonly sent: boolean;
  /**
   * Headers of the entry being refreshed, kept when the handler cannot set them again (sent
   * already).
   */
  readonly carried: Readonly<Record<string, string>>;
}

/** The status and the headers the handler left on the response. */
export interface HandlerOutput {
  readonly status: number;
  readonly headers: Record<string, string>;
  /** The response was sent by the handler itself (not by Nest from the returned body). */
  readonly sentByHandler: boolean;
}

/**
 * One request's response, shared by the cache and the handler. A stale read answers the request
 * from the cache at once while the same request's handler refreshes the entry in the background:
 * both write the one response object. To read back only what the handler set, a refresh whose
 * request was answered from the cache waits for that answer to be sent, then puts back the status
 * Nest prepared before it runs the handler.
 */
export class ResponseExchange {
  /** The status Nest set before the interceptors ran (`@HttpCode`, or 200). */
  readonly preparedStatus: number;
  /** The `Cache-Control` set before the handler ran (`@Header`, a middleware), if any. */
  readonly preparedCacheControl: string | undefined;
  /** Set by {@link replay} (the request is answered from the cache), read by {@link beforeRun}. */
  #replayed = false;

  constructor(readonly response: HttpResponse) {
    this.preparedStatus = response.status;
    this.preparedCacheControl = response.header('cache-control');
  }

  /** Writes a stored response's status and headers; returns the body to answer with. */
  replay(stored: unknown): unknown {
    this.#replayed = true;
    if (!isCachedResponse(stored)) return stored;
    if (this.response.status !== stored.status) this.response.status = stored.status;
    for (const [name, value] of Object.entries(stored.headers ?? {}))
      this.response.setHeader(name, value);
    return stored.body;
  }

  /**
   * Called before the handler runs for a load. `refreshing` is the entry the load refreshes (a
   * stale or early refresh), `undefined` on a miss. A refresh may run for a request answered from
   * that entry: then this waits until that answer is sent and puts back the prepared status.
   */
  async beforeRun(refreshing: unknown): Promise<RunBaseline> {
    if (refreshing !== undefined) {
      // The answer from the cache, if there is one, is written within the current turn of the event
      // loop.
      await new Promise((resolve) => setImmediate(resolve));
      if (this.#replayed) {
        await this.response.sent();
        this.response.status = this.preparedStatus;
        return {
          headers: this.response.headers(),
          sent: true,
          carried: isCachedResponse(refreshing) ? (refreshing.headers ?? {}) : {},
        };
      }
    }
    // Nothing was replayed on this response: it holds what was set before the handler (read here,
    // off the hit path).
    return {
      headers: this.response.headers(),
      sent: this.response.headersSent,
      carried: {},
    };
  }

  /** What the handler set during the run that started at `baseline`. */
  handlerOutput(baseline: RunBaseline): HandlerOutput {
    const set: Record<string, string> = {};
    for (const [name, value] of Object.entries(this.response.headers())) {
      if (value !== baseline.headers[name]) set[name] = value;
    }
    return {
      status: this.response.status,
      headers: { ...baseline.carried, ...replayedHeaders(set) },
      sentByHandler: !baseline.sent && this.response.headersSent,
    };
  }
}
