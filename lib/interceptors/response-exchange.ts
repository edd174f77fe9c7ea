import { isCachedResponse, replayedHeaders } from './cached-response.js';
import type { HttpResponse } from './http-response.js';
import type { ReplayPlans } from './replay-plans.js';

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
  /**
   * The Content-Type the response holds as the body goes out (set before the handler, or by it),
   * before the platform adds its own.
   */
  readonly contentType: string | undefined;
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
  /** The `Expires` set before the handler ran, if any. */
  readonly preparedExpires: string | undefined;
  /** Set by {@link replay} (the request is answered from the cache), read by {@link beforeRun}. */
  #replayed = false;
  /**
   * The Content-Type the response held before a replay wrote the stored one, for a refresh that
   * runs after that answer; read only when a replay writes one.
   */
  #preparedContentType: string | undefined;

  constructor(readonly response: HttpResponse) {
    this.preparedStatus = response.status;
    this.preparedCacheControl = response.header('cache-control');
    this.preparedExpires = response.header('expires');
  }

  /**
   * Writes a stored response's status and headers as its plan says; returns the body to answer
   * with.
   */
  replay(stored: unknown, plans: ReplayPlans): unknown {
    this.#replayed = true;
    const plan = plans.of(stored);
    if (plan === undefined) return plans.platform.bare(stored);
    if (plan.setsContentType) this.#preparedContentType = this.response.header('content-type');
    if (this.response.status !== plan.status) this.response.status = plan.status;
    for (const [name, value] of plan.headers) this.response.setHeaderAsIs(name, value);
    return plan.answer();
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
        return { headers: this.response.headers(), sent: true, carried: carriedOf(refreshing) };
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
    const headers = { ...baseline.carried, ...replayedHeaders(set) };
    return {
      status: this.response.status,
      headers,
      // Once an answer from the cache went out, the response holds its Content-Type, not the run's.
      contentType: baseline.sent
        ? (headers['content-type'] ?? this.#preparedContentType)
        : this.response.header('content-type'),
      sentByHandler: !baseline.sent && this.response.headersSent,
    };
  }
}

/**
 * The headers of the entry a refresh replaces that the refresh keeps when its handler cannot set
 * them again (its answer went out): all but the Content-Type, which each run's body decides.
 */
function carriedOf(refreshing: unknown): Readonly<Record<string, string>> {
  if (!isCachedResponse(refreshing) || refreshing.headers === undefined) return {};
  const { 'content-type': _contentType, ...carried } = refreshing.headers;
  return carried;
}
