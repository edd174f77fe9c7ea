/**
 * What `HerdGuardInterceptor` stores for a route: the status, the body and the headers that
 * describe it, as the pod that loaded it answered. A plain object, so any store can hold it. A
 * handler that answers `null` or `undefined` with its usual status is stored as a bare value
 * instead (a cached "not found", kept for `negativeTtl`): `undefined` when that answer was an
 * empty body, `null` when it was JSON `null` (Fastify).
 */
export interface CachedResponse {
  readonly status: number;
  /**
   * The body as the loading pod's platform answered it: the value the handler returned, but JSON's
   * view of a binary body Express answered as JSON; absent for an empty body. (An entry of an
   * earlier release holds the value as returned.)
   */
  readonly body?: unknown;
  /**
   * Headers the handler set, by lower-case name (see {@link replayedHeaders}), and the
   * `content-type` the answer went out with (absent in an entry of an earlier release).
   */
  readonly headers?: Readonly<Record<string, string>>;
}

/**
 * The statuses stored: those HTTP calls cacheable by default (RFC 9110 §15.1), without 206 (a range
 * of the body), 405, 414 and 501. Any other status (201, 302, 400 set on the response, 5xx…) is
 * sent to the request that produced it and never stored.
 */
export const CACHEABLE_STATUSES: ReadonlySet<number> = new Set([
  200, 203, 204, 300, 301, 308, 404, 410,
]);

/**
 * Headers never stored with a response, though the handler set them: `Set-Cookie` (a response
 * that sets a cookie is never stored), the hop-by-hop fields of RFC 9110 §7.6.1 (and any field a
 * `Connection` header names), fields the server writes for each response (`Date`,
 * `Content-Length`), herd-guard's own (`Age`, `X-Cache`) and `Vary`, which the interceptor turns
 * into part of the key and writes on every answer. Every other header the handler set describes
 * the body and is replayed with it.
 */
const NOT_REPLAYED_HEADERS: ReadonlySet<string> = new Set([
  'set-cookie',
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'transfer-encoding',
  'upgrade',
  'date',
  'content-length',
  'age',
  'x-cache',
  'vary',
]);

/**
 * The headers to store of those the handler set (lower-case names): all but
 * {@link NOT_REPLAYED_HEADERS} and the fields its `Connection` header names.
 */
export function replayedHeaders(set: Readonly<Record<string, string>>): Record<string, string> {
  const connection = new Set(
    (set['connection'] ?? '')
      .split(',')
      .map((name) => name.trim().toLowerCase())
      .filter((name) => name !== ''),
  );
  const kept: Record<string, string> = {};
  for (const [name, value] of Object.entries(set)) {
    if (!NOT_REPLAYED_HEADERS.has(name) && !connection.has(name)) kept[name] = value;
  }
  return kept;
}

/** The largest delta-seconds a cache must honour (RFC 9111 §1.2.2). */
const MAX_DELTA_SECONDS = 2_147_483_648;

/**
 * Whether a response's `Cache-Control` forbids herd-guard to store it, read as a shared cache
 * (RFC 9111 §5.2.2): `no-store`, `no-cache`, `private` (allowed on a scoped route, whose entry
 * belongs to one user), or a freshness lifetime of zero (`s-maxage=0`, or `max-age=0` without
 * `s-maxage`, with or without `must-revalidate`/`proxy-revalidate`; a negative one, or one given
 * twice with different values, is invalid and counts as zero): such a response must not be reused
 * without asking the origin again, which a cache hit would not do.
 */
export function forbidsStoring(cacheControl: string | undefined, scoped: boolean): boolean {
  if (cacheControl === undefined) return false;
  let maxAge: string | undefined;
  let sharedMaxAge: string | undefined;
  for (const directive of cacheControl.split(',')) {
    const [rawName, ...rest] = directive.split('=');
    const name = rawName!.trim().toLowerCase();
    if (name === 'no-store' || name === 'no-cache' || (name === 'private' && !scoped)) return true;
    const value = rest
      .join('=')
      .trim()
      .replace(/^"(.*)"$/, '$1');
    // A lifetime given twice with different values is invalid freshness information: stale
    // (RFC 9111 §4.2.1), so not stored.
    if (name === 'max-age') {
      if (maxAge !== undefined && maxAge !== value) return true;
      maxAge = value;
    } else if (name === 's-maxage') {
      if (sharedMaxAge !== undefined && sharedMaxAge !== value) return true;
      sharedMaxAge = value;
    }
  }
  // s-maxage wins over max-age for a shared cache. A negative one is invalid: stale, as zero.
  const lifetime = sharedMaxAge ?? maxAge;
  return lifetime !== undefined && /^(0+|-\d+)$/.test(lifetime);
}

/**
 * The cache lifetime a response's `Cache-Control` gives a shared cache (RFC 9111 §5.2.2), in ms:
 * `s-maxage`, else `max-age`, else `expiresMs` (the lifetime its `Expires` gives, see
 * {@link expiresLifetimeMs}) as `softMs`, and `stale-while-revalidate` (RFC 5861) as `staleMs`:
 * 0 with `must-revalidate` or `proxy-revalidate`, or with `s-maxage` and no
 * `stale-while-revalidate` (never served stale), `undefined` when the route's hard TTL applies.
 * `undefined` when it names no lifetime (or only malformed ones, which are ignored).
 */
export function cacheControlLifetime(
  cacheControl: string | undefined,
  expiresMs?: number,
): { readonly softMs: number; readonly staleMs: number | undefined } | undefined {
  const seconds = new Map<string, number>();
  let revalidate = false;
  for (const directive of cacheControl?.split(',') ?? []) {
    const [rawName, ...rest] = directive.split('=');
    const name = rawName!.trim().toLowerCase();
    if (name === 'must-revalidate' || name === 'proxy-revalidate') revalidate = true;
    const value = rest
      .join('=')
      .trim()
      .replace(/^"(.*)"$/, '$1');
    // delta-seconds (RFC 9111 §1.2.2): digits only.
    // A value too large to represent counts as 2^31 seconds (RFC 9111 §1.2.2).
    if (/^\d+$/.test(value)) seconds.set(name, Math.min(Number(value), MAX_DELTA_SECONDS));
  }
  const lifetime = seconds.get('s-maxage') ?? seconds.get('max-age');
  const softMs =
    lifetime === undefined ? Math.min(expiresMs ?? 0, MAX_DELTA_SECONDS * 1_000) : lifetime * 1_000;
  if (softMs <= 0) return undefined;
  // Once stale, a response with must-revalidate or proxy-revalidate must not be served unless
  // revalidated (RFC 9111 §4.2.4), even with a stale-while-revalidate. s-maxage carries
  // proxy-revalidate (RFC 9111 §5.2.2.10), but a stale-while-revalidate given with it is kept: the
  // usual way to ask a CDN for one.
  if (revalidate) return { softMs, staleMs: 0 };
  const stale = seconds.get('stale-while-revalidate');
  if (stale === undefined) return { softMs, staleMs: seconds.has('s-maxage') ? 0 : undefined };
  return { softMs, staleMs: stale * 1_000 };
}

/** An HTTP-date (RFC 9110 §5.6.7) in any of its three formats: each starts with the day name. */
const HTTP_DATE = /^\s*(mon|tue|wed|thu|fri|sat|sun)[a-z]*,?\s/i;

/**
 * The freshness a response's `Expires` leaves it, in ms: its lifetime (RFC 9111 §4.2.1: `Expires`
 * minus `Date`, or minus `now` when the handler set no `Date`) less its age (§4.2.3: `now` minus a
 * `Date` in the past, as when a handler relays an upstream's response): 0 or less when it is in the past or is
 * no HTTP-date (`Expires: 0`, a common way to say "do not cache"), which RFC 9111 §5.3 reads as
 * already expired. `undefined` without `Expires`, or when `cacheControl` has a `max-age` or an
 * `s-maxage`, which a shared cache takes instead (RFC 9111 §5.3).
 */
export function expiresLifetimeMs(
  expires: string | undefined,
  cacheControl: string | undefined,
  date: string | undefined,
  now: number,
): number | undefined {
  if (expires === undefined || namesLifetime(cacheControl)) return undefined;
  const expiresAt = HTTP_DATE.test(expires) ? Date.parse(expires) : Number.NaN;
  if (Number.isNaN(expiresAt)) return 0;
  const sentAt = date !== undefined && HTTP_DATE.test(date) ? Date.parse(date) : Number.NaN;
  if (Number.isNaN(sentAt)) return expiresAt - now;
  return expiresAt - sentAt - Math.max(0, now - sentAt);
}

/** Whether a `Cache-Control` has a `max-age` or an `s-maxage` directive, valid or not. */
function namesLifetime(cacheControl: string | undefined): boolean {
  if (cacheControl === undefined) return false;
  return cacheControl.split(',').some((directive) => {
    const name = directive.split('=', 1)[0]!.trim().toLowerCase();
    return name === 'max-age' || name === 's-maxage';
  });
}

/**
 * A value the interceptor stored as a response (anything else found under a route key is a bare
 * body).
 */
export function isCachedResponse(value: unknown): value is CachedResponse {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const { status, headers } = value as { status?: unknown; headers?: unknown };
  return (
    typeof status === 'number' &&
    Object.keys(value).every(
      (name) => name === 'status' || name === 'body' || name === 'headers',
    ) &&
    (headers === undefined || (typeof headers === 'object' && headers !== null))
  );
}
