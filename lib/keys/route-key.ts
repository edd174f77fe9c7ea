/** What identifies a cached HTTP response. */
export interface RouteKeyParts {
  /** The request method. `HEAD` shares the `GET` entry (same handler; the server drops the body). */
  readonly method: string;
  /** The URL as received: path and optional query string (`/items?page=2`). */
  readonly url: string;
  /** Query parameters left out of the key, by exact name (cache busters such as `_`, `utm_source`). */
  readonly ignoreQuery?: readonly string[];
  /** Request header values the response varies by, by header name (matched case-insensitively). */
  readonly vary?: Readonly<Record<string, string | undefined>>;
  /** A user or tenant the response belongs to; `undefined` for a response shared by everyone. */
  readonly scope?: string;
}

/**
 * The cache key of an HTTP response: `http:GET /items?a=1&b=2`, then ` name=value` per vary
 * header (sorted by name) and ` @scope` when scoped. Query parameters are sorted by name (values
 * of a repeated name keep their order) and re-encoded, so `?b=2&a=1` and `?a=1&b=2` share an
 * entry. Header values and the scope are percent-encoded, so the parts cannot run into each other.
 */
export function routeCacheKey(parts: RouteKeyParts): string {
  const method = parts.method.toUpperCase() === 'HEAD' ? 'GET' : parts.method.toUpperCase();
  const queryAt = parts.url.indexOf('?');
  const path = queryAt === -1 ? parts.url : parts.url.slice(0, queryAt);
  const query = queryAt === -1 ? '' : canonicalQuery(parts.url.slice(queryAt + 1), parts.ignoreQuery ?? []);
  let key = `http:${method} ${path}${query === '' ? '' : `?${query}`}`;
  const vary = Object.entries(parts.vary ?? {})
    .map(([name, value]) => `${name.toLowerCase()}=${encodeURIComponent(value ?? '')}`)
    .sort();
  for (const header of vary) key += ` ${header}`;
  if (parts.scope !== undefined) key += ` @${encodeURIComponent(parts.scope)}`;
  return key;
}

function canonicalQuery(raw: string, ignored: readonly string[]): string {
  const params = new URLSearchParams(raw);
  for (const name of ignored) params.delete(name);
  params.sort();
  return params.toString();
}
