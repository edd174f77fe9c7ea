/**
 * What a write (RFC 9111 §4.4) invalidates: the methods that are writes, the answers that count as
 * done, and the paths named by its `Location` and `Content-Location`.
 */

/** The methods whose successful answer invalidates what the cache holds for the target path. */
export const UNSAFE_METHODS: ReadonlySet<string> = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** Only a 2xx or 3xx answer changed anything: a failed write leaves the entries valid. */
export function isDoneWrite(status: number): boolean {
  return status >= 200 && status < 400;
}

/** Stands for the request's own host while a reference is resolved (a reserved TLD). */
const OWN_HOST = 'request-host.invalid';

/**
 * The path `reference` (a `Location` or `Content-Location` value, absolute or relative to
 * `requestPath`) names on the request's origin, or `undefined` when it names another origin or is
 * no URL: a response may not invalidate what another site's entries hold. `hostNames` are the
 * request's host names, lower case (the port is not compared: keys leave it out).
 */
export function sameOriginPath(
  reference: string,
  scheme: string,
  hostNames: readonly string[],
  requestPath: string,
): string | undefined {
  let url: URL;
  try {
    url = new URL(reference, `${scheme}://${OWN_HOST}${requestPath}`);
  } catch {
    return undefined;
  }
  if (url.protocol !== `${scheme}:`) return undefined;
  if (url.hostname !== OWN_HOST && !hostNames.includes(url.hostname)) return undefined;
  return url.pathname;
}
