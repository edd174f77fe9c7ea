/**
 * What `HerdGuardInterceptor` stores for a route: the status, the body and the few headers the
 * handler set that describe the body. A plain object, so any store can hold it. A handler that
 * answers `null` or `undefined` with its usual status is stored as the bare `null` instead (a
 * cached "not found", kept for `negativeTtl`).
 */
export interface CachedResponse {
  readonly status: number;
  readonly body?: unknown;
  /** Headers the handler set, by lower-case name (only {@link REPLAYED_HEADERS}). */
  readonly headers?: Readonly<Record<string, string>>;
}

/**
 * The statuses stored: those HTTP calls cacheable by default (RFC 9110 §15.1), without 206 (a range
 * of the body), 405, 414 and 501. Any other status (201, 302, 400 set on the response, 5xx…) is
 * sent to the request that produced it and never stored.
 */
export const CACHEABLE_STATUSES: ReadonlySet<number> = new Set([200, 203, 204, 300, 301, 308, 404, 410]);

/**
 * Headers set by the handler that are stored and replayed: they describe the body, never the
 * client. `Set-Cookie` is not among them; a response that sets a cookie is never stored.
 */
export const REPLAYED_HEADERS: readonly string[] = [
  'cache-control',
  'content-disposition',
  'content-language',
  'content-type',
  'etag',
  'last-modified',
  'link',
  'location',
];

/**
 * Whether a response's `Cache-Control` forbids herd-guard to store it: `no-store`, `no-cache`, or
 * `private` (allowed on a scoped route, whose entry belongs to one user).
 */
export function forbidsStoring(cacheControl: string | undefined, scoped: boolean): boolean {
  if (cacheControl === undefined) return false;
  for (const directive of cacheControl.split(',')) {
    const name = directive.split('=')[0]!.trim().toLowerCase();
    if (name === 'no-store' || name === 'no-cache' || (name === 'private' && !scoped)) return true;
  }
  return false;
}

/** A value the interceptor stored as a response (anything else found under a route key is a bare body). */
export function isCachedResponse(value: unknown): value is CachedResponse {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const { status, headers } = value as { status?: unknown; headers?: unknown };
  return (
    typeof status === 'number' &&
    Object.keys(value).every((name) => name === 'status' || name === 'body' || name === 'headers') &&
    (headers === undefined || (typeof headers === 'object' && headers !== null))
  );
}
