import { hostName } from './host-name.js';

/** What identifies a cached HTTP response. */
export interface RouteKeyParts {
  /**
   * The request method. `HEAD` shares the `GET` entry (same handler; the server drops the body).
   */
  readonly method: string;
  /** The URL as received: path and optional query string (`/items?page=2`). */
  readonly url: string;
  /**
   * The host the request was sent to, so two sites or tenants served by one app never share an
   * entry: its host name, lower case; a port, if given (`shop.example.com:8080`), is left out, as
   * Nest routes by host name. A route whose response depends on the port varies by `host` (its
   * whole value is then in `vary`).
   */
  readonly host?: string;
  /**
   * The scheme the request was sent over (`https`), so a page with links or a redirect built for
   * one scheme is never served over the other; `http` (the default) is left out of the key.
   */
  readonly scheme?: string;
  /**
   * The route handler (`ItemsController.list`, `;v=2` when versioned), so two handlers behind one
   * URL never share.
   */
  readonly handler?: string;
  /**
   * Query parameters left out of the key, by exact name (cache busters such as `_`, `utm_source`).
   */
  readonly ignoreQuery?: readonly string[];
  /** Request header values the response varies by, by header name (matched case-insensitively). */
  readonly vary?: Readonly<Record<string, string | undefined>>;
  /** A user or tenant the response belongs to; `undefined` for a response shared by everyone. */
  readonly scope?: string;
}

/**
 * The cache key of an HTTP response:
 * `http:GET ItemsController.list //shop.example.com/items?a=1&b=2` (the handler and the host name
 * when given; `https://shop.example.com/…` over another scheme than `http`), then ` name=value` per vary header (sorted by name) and ` @scope` when scoped.
 * Query parameters are sorted by name (values of a repeated name keep their order) as they were
 * sent, without decoding them, so `?b=2&a=1` and `?a=1&b=2` share an entry while `?q=caf%E9` and
 * `?q=caf%E8` (bytes that are not UTF-8) do not. The scheme, the host name, the header values and
 * the scope are percent-encoded, so the parts cannot run into each other; a URL that does not start with one
 * `/` (`//x/y` without a host, `*`, `http://x/y`) is written after a space, so it cannot be read as
 * a host either.
 */
export function routeCacheKey(parts: RouteKeyParts): string {
  const method = parts.method.toUpperCase() === 'HEAD' ? 'GET' : parts.method.toUpperCase();
  const queryAt = parts.url.indexOf('?');
  const path = queryAt === -1 ? parts.url : parts.url.slice(0, queryAt);
  const query =
    queryAt === -1 ? '' : canonicalQuery(parts.url.slice(queryAt + 1), parts.ignoreQuery ?? []);
  const handler = parts.handler === undefined ? '' : ` ${encodeName(parts.handler)}`;
  let key = `http:${method}${handler} ${target(parts, path)}${query === '' ? '' : `?${query}`}`;
  const vary = Object.entries(parts.vary ?? {})
    .map(([name, value]) => `${name.toLowerCase()}=${encodeURIComponent(value ?? '')}`)
    .sort();
  for (const header of vary) key += ` ${header}`;
  if (parts.scope !== undefined) key += ` @${encodeURIComponent(parts.scope)}`;
  return key;
}

/**
 * The tag every cached GET response of a path is stored with, whatever its handler, query, vary
 * headers or scope: `http:path //shop.example.com/items`, the origin and path written as in
 * {@link routeCacheKey}. A write to the path deletes the tag's entries.
 */
export function routePathTag(parts: Pick<RouteKeyParts, 'url' | 'host' | 'scheme'>): string {
  const queryAt = parts.url.indexOf('?');
  return `http:path ${target(parts, queryAt === -1 ? parts.url : parts.url.slice(0, queryAt))}`;
}

/** Scheme, host name and `path` as a key writes them. */
function target(parts: Pick<RouteKeyParts, 'host' | 'scheme'>, path: string): string {
  const host = parts.host === undefined ? '' : `//${encodeName(hostName(parts.host))}`;
  // Left out for `http`, so the keys of plain-HTTP requests are those of a release without it. A
  // scheme starts with a letter: it cannot be read as a host (`//`) or a path (`/`, ` `).
  const scheme = parts.scheme?.toLowerCase();
  const origin =
    scheme === undefined || scheme === 'http' ? host : `${encodeURIComponent(scheme)}:${host}`;
  // After `//host` the path must start with `/`; without a host it must not start with `//`.
  const plainPath = path.startsWith('/') && (parts.host !== undefined || !path.startsWith('//'));
  return `${origin}${plainPath ? '' : ' '}${path}`;
}

/**
 * Keeps the characters of host names and handler names; percent-encodes anything else (spaces, `/`,
 * `@`).
 */
function encodeName(name: string): string {
  return name.replace(/[^A-Za-z0-9._~:;,=$[\]-]/g, (char) => encodeURIComponent(char));
}

/**
 * The query's `name=value` pairs as sent (never decoded, so no two byte sequences merge), empty
 * ones and ignored names left out, stably sorted by name.
 */
function canonicalQuery(raw: string, ignored: readonly string[]): string {
  const pairs = raw
    .split('&')
    .filter((pair) => pair !== '')
    .map((pair) => ({ pair, name: pair.split('=', 1)[0]! }))
    .filter(({ name }) => !ignored.includes(decodedName(name)));
  pairs.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return pairs.map(({ pair }) => pair).join('&');
}

/**
 * A parameter name as the handler reads it, to match `ignoreQuery`; as sent when it does not
 * decode.
 */
function decodedName(name: string): string {
  try {
    return decodeURIComponent(name.replace(/\+/g, ' '));
  } catch {
    return name;
  }
}
