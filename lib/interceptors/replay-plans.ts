import { StreamableFile } from '@nestjs/common';
import { type CachedResponse, isCachedResponse } from './cached-response.js';
import type { PlatformBody, ReplayBody } from './platform-body.js';

/** How to answer from one stored response on this pod: made once per entry, used by every hit. */
export class ReplayPlan {
  constructor(
    readonly status: number,
    /** The stored headers, by lower-case name, written as they are. */
    readonly headers: ReadonlyArray<readonly [string, string]>,
    /** Whether `headers` set the Content-Type (the one the response held is then kept aside). */
    readonly setsContentType: boolean,
    private readonly body: ReplayBody,
  ) {}

  /** The body to hand Nest for one answer (bytes in a stream of their own: streams read once). */
  answer(): unknown {
    return this.body.bytes === undefined ? this.body.value : new StreamableFile(this.body.bytes);
  }
}

/**
 * The replay plans of the stored responses this pod answers from, by entry: an entry read from the
 * cache is the same object on every hit, so its plan is made once, on the first.
 */
export class ReplayPlans {
  /** `null`: a value that is not a stored response (a bare body), answered as it is. */
  readonly #plans = new WeakMap<object, ReplayPlan | null>();

  constructor(readonly platform: PlatformBody) {}

  /**
   * The plan for `stored`; `undefined` for a bare body (a cached "not found", or a value another
   * writer put under the key), handed to Nest as {@link PlatformBody.bare} says.
   */
  of(stored: unknown): ReplayPlan | undefined {
    if (typeof stored !== 'object' || stored === null) return undefined;
    let plan = this.#plans.get(stored);
    if (plan === undefined) {
      plan = isCachedResponse(stored) ? this.#plan(stored) : null;
      this.#plans.set(stored, plan);
    }
    return plan ?? undefined;
  }

  #plan(stored: CachedResponse): ReplayPlan {
    const headers = Object.entries(stored.headers ?? {});
    const contentType = stored.headers?.['content-type'];
    return new ReplayPlan(
      stored.status,
      headers,
      contentType !== undefined,
      this.platform.replay(stored.body, contentType),
    );
  }
}
