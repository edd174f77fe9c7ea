/**
 * Whether an error thrown by a loader means the loader failed (and belongs in failure logs and
 * error metrics), or is the loader's answer to its caller: an error carrying an HTTP status below
 * 500 through `getStatus()`, as Nest's `HttpException` does (a `ParseIntPipe` 400, a guard's 403,
 * a `NotFoundException` from a `@Cached` method), or a response the interceptor declined to store.
 * Such errors still reach the caller unchanged; they are only not counted as failures.
 */
export function isLoaderFailure(error: unknown): boolean {
  const status = httpStatusOf(error);
  return status === undefined || status >= 500;
}

/** The status an error answers with through `getStatus()` (Nest's `HttpException`), if any. */
export function httpStatusOf(error: unknown): number | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const getStatus = (error as { getStatus?: unknown }).getStatus;
  if (typeof getStatus !== 'function') return undefined;
  const status: unknown = getStatus.call(error);
  return typeof status === 'number' && Number.isInteger(status) ? status : undefined;
}

/**
 * Whether an error answers only the caller whose loader threw it: it carries `perCaller: true`,
 * as a response the interceptor declined to store does (it may be private to its request). Other
 * callers run their own loader instead of sharing it, and no backoff follows it, unless a stale
 * value is served in its place.
 */
export function isPerCallerAnswer(error: unknown): boolean {
  return (
    typeof error === 'object' &&
    error !== null &&
    (error as { perCaller?: unknown }).perCaller === true
  );
}
