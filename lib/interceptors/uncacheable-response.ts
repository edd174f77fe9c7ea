/**
 * Thrown out of the interceptor's loader when the handler produced a response that must not be
 * stored (a stream, a status outside the cacheable set, a `Cache-Control` or a `Set-Cookie` that
 * forbids it, a body the serializer refuses). The interceptor sends `body` to the request whose
 * handler produced it; requests that joined that run execute their own handler. `getStatus()`
 * tells logs and metrics that a status below 500 is an answer, not a loader failure.
 */
export class UncacheableResponse extends Error {
  /** This response answers its own request only (see `isPerCallerAnswer`). */
  readonly perCaller = true;

  /** `options.cause`: what refused it, when that is an error (a `SerializationError`). */
  constructor(
    readonly body: unknown,
    readonly status: number,
    reason: string,
    options?: ErrorOptions,
  ) {
    super(`Response not stored: ${reason}`, options);
    this.name = 'UncacheableResponse';
  }

  getStatus(): number {
    return this.status;
  }

  /** A server error: other requests may be served a stale entry instead (fail-safe). */
  get failure(): boolean {
    return this.status >= 500;
  }
}
