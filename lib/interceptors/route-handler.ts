import { StreamableFile } from '@nestjs/common';
import { designReturnType, isClassOrSubclass, readMetadata } from '../metadata/design-metadata.js';

// Nest's own metadata keys (`@nestjs/common` constants, unchanged since Nest 8), read without
// importing Nest internals.
const SSE_METADATA = '__sse__';
const ROUTE_ARGS_METADATA = '__routeArguments__';
const RESPONSE_PASSTHROUGH_METADATA = '__responsePassthrough__';
const VERSION_METADATA = '__version__';
const REDIRECT_METADATA = '__redirect__';
/** `RouteParamtypes.RESPONSE` and `RouteParamtypes.NEXT`: the handler answers by itself. */
const RESPONSE_PARAM_TYPES: ReadonlySet<string> = new Set(['1', '2']);

/** What the interceptor needs to know about a route handler, read once from its metadata. */
export interface RouteHandler {
  /**
   * Names the handler in cache keys: `ItemsController.list`, then `;v=<versions>` when versioned.
   */
  readonly id: string;
  /**
   * Why the handler's responses cannot be replayed (SSE, `@Res()`, a declared stream), or
   * `undefined`.
   */
  readonly unreplayable: string | undefined;
  /** The handler takes `@Res({ passthrough: true })`: it may set the status and headers itself. */
  readonly writesResponse: boolean;
  /**
   * For a `@Redirect()` handler, the status Nest redirects with when the returned value names none
   * (the decorator's, else 302); `undefined` for other handlers.
   */
  readonly redirectStatus: number | undefined;
  /** For a `@Redirect()` handler, the decorator's url (`''`: the handler returns one). */
  readonly redirectUrl: string | undefined;
}

export function describeRouteHandler(
  controller: new (...args: never[]) => unknown,
  handler: object,
): RouteHandler {
  const name = (handler as { name?: string }).name ?? '';
  const version = versionOf(
    readMetadata(VERSION_METADATA, handler) ?? readMetadata(VERSION_METADATA, controller),
  );
  const takesResponse = takesResponseObject(controller, name);
  const passthrough = readMetadata(RESPONSE_PASSTHROUGH_METADATA, controller, name) === true;
  const redirect = redirectOf(readMetadata(REDIRECT_METADATA, handler));
  return {
    id: `${controller.name}.${name}${version === undefined ? '' : `;v=${version}`}`,
    unreplayable:
      readMetadata(SSE_METADATA, handler) === true
        ? 'a server-sent events route'
        : takesResponse && !passthrough
          ? 'a handler that writes the response itself (@Res() or @Next())'
          : declaresStream(controller, name)
            ? 'a handler declared to return a StreamableFile'
            : undefined,
    writesResponse: takesResponse && passthrough,
    redirectStatus: redirect?.status,
    redirectUrl: redirect?.url,
  };
}

/**
 * The status a response goes out with after the handler returned `body`: a `@Redirect()` handler's
 * is set by Nest after the interceptors ran (the returned `statusCode`, else the decorator's, as
 * Nest's RouterResponseController reads them); any other handler's is the response's, `current`.
 */
export function finalStatus(handler: RouteHandler, body: unknown, current: number): number {
  if (handler.redirectStatus === undefined) return current;
  const returned =
    typeof body === 'object' && body !== null
      ? (body as { statusCode?: unknown }).statusCode
      : undefined;
  return typeof returned === 'number' && returned !== 0 ? returned : handler.redirectStatus;
}

/**
 * The `Location` a response goes out with after the handler returned `body`: a `@Redirect()`
 * handler's is set by Nest after the interceptors ran (a returned non-empty `url`, else the
 * decorator's); any other handler's is the response's, `current`.
 */
export function finalLocation(
  handler: RouteHandler,
  body: unknown,
  current: string | undefined,
): string | undefined {
  if (handler.redirectUrl === undefined) return current;
  const returned =
    typeof body === 'object' && body !== null ? (body as { url?: unknown }).url : undefined;
  return typeof returned === 'string' && returned !== '' ? returned : handler.redirectUrl;
}

/**
 * Whether a value the handler returned is a stream Nest sends as it is produced: a
 * `StreamableFile`,
 * a Node.js or web stream, an async iterable (not a thenable) or a web `Response`.
 */
export function isStreamBody(body: unknown): boolean {
  if (body instanceof StreamableFile) return true;
  if (typeof body !== 'object' || body === null) return false;
  const candidate = body as {
    [Symbol.asyncIterator]?: unknown;
    then?: unknown;
    pipe?: unknown;
    getReader?: unknown;
  };
  if (typeof candidate.then === 'function') return false;
  return (
    typeof candidate[Symbol.asyncIterator] === 'function' ||
    typeof candidate.pipe === 'function' ||
    typeof candidate.getReader === 'function' ||
    Object.prototype.toString.call(body) === '[object Response]'
  );
}

/** The handler takes the response (`@Res()`) or `next` (`@Next()`) as a parameter. */
function takesResponseObject(controller: object, name: string): boolean {
  const args = readMetadata(ROUTE_ARGS_METADATA, controller, name);
  return (
    typeof args === 'object' &&
    args !== null &&
    Object.keys(args).some((slot) => RESPONSE_PARAM_TYPES.has(slot.split(':')[0]!))
  );
}

function declaresStream(controller: object, name: string): boolean {
  const prototype = (controller as { prototype?: object }).prototype;
  return (
    prototype !== undefined && isClassOrSubclass(designReturnType(prototype, name), StreamableFile)
  );
}

/**
 * Nest redirects only when `@Redirect()` left a string url (possibly empty: the handler returns
 * one); its status is the decorator's, else 302.
 */
function redirectOf(redirect: unknown): { status: number; url: string } | undefined {
  if (typeof redirect !== 'object' || redirect === null) return undefined;
  const { url, statusCode } = redirect as { url?: unknown; statusCode?: unknown };
  if (typeof url !== 'string') return undefined;
  return { status: typeof statusCode === 'number' && statusCode !== 0 ? statusCode : 302, url };
}

/** `1`, `1,2` (sorted), `neutral`, or `undefined` for an unversioned handler. */
function versionOf(version: unknown): string | undefined {
  if (version === undefined || version === null) return undefined;
  const versions = Array.isArray(version) ? version : [version];
  return versions
    .map((item: unknown) =>
      typeof item === 'symbol' ? (item.description ?? 'neutral') : String(item),
    )
    .sort()
    .join(',');
}
