/**
 * The Node.js response methods the watch wraps (`ServerResponse`, or HTTP/2's compatibility
 * response).
 */
type NodeResponse = {
  headersSent?: unknown;
  writableEnded?: unknown;
  destroyed?: unknown;
  closed?: unknown;
  stream?: { destroyed?: unknown };
  writeHead(...args: unknown[]): unknown;
  setHeader(name: string, value: unknown): unknown;
  appendHeader?(name: string, value: unknown): unknown;
  getHeader(name: string): unknown;
  once?(event: string, listener: () => void): unknown;
};

/** One watch per response, however many interceptors look at it. */
const WATCH = Symbol('herd-guard.response-head');

type WatchedResponse = NodeResponse & { [WATCH]?: ResponseHead };

/**
 * The head of one response as it goes out. A `Set-Cookie` may be added at the very last moment,
 * after the handler and the interceptors ran: express-session does it when the head is written
 * (through on-headers, which wraps `writeHead`), @fastify/session in an `onSend` hook (Fastify then
 * passes its headers to `writeHead`). The watch wraps the response's `writeHead`, `setHeader` and
 * `appendHeader` to see such a cookie, however late, and then
 * - makes a `Cache-Control` that would let a shared cache store the response `private, no-store`
 *   (the response carries one visitor's cookie), and
 * - reports, once the head is written, that it carried a cookie.
 *
 * It is on every cached request's path, so it allocates little: the wrappers are shared by all
 * responses (they find their watch on the response), and the {@link written} promise and its
 * `finish`/`close` listeners exist only once something asks for it (a run fenced on its head).
 */
export class ResponseHead {
  /** Written by the wrappers when a `Set-Cookie` is set or passed to `writeHead`; never unset. */
  #setCookie = false;
  /**
   * Written once, by the first `writeHead` (or `finish`/`close` once {@link written} was asked
   * for).
   */
  #written = false;
  #whenWritten: Promise<void> | undefined;
  #settle: (() => void) | undefined;
  /**
   * The methods the wrappers call through to: the response's own, or the hooks installed before the
   * watch.
   */
  readonly #writeHead: NodeResponse['writeHead'];
  readonly #setHeader: NodeResponse['setHeader'];
  readonly #appendHeader: NodeResponse['appendHeader'];

  private constructor(private readonly node: WatchedResponse) {
    this.#writeHead = node.writeHead;
    this.#setHeader = node.setHeader;
    this.#appendHeader = node.appendHeader;
    if (node.headersSent === true) {
      this.#setCookie = node.getHeader('set-cookie') !== undefined;
      this.#written = true;
      return;
    }
    node.writeHead = ResponseHead.#wrappedWriteHead;
    node.setHeader = ResponseHead.#wrappedSetHeader;
    if (this.#appendHeader !== undefined) node.appendHeader = ResponseHead.#wrappedAppendHeader;
  }

  /**
   * Watches the Node.js response `raw` (Express's response, Fastify's `reply.raw`); `undefined` for
   * anything else.
   */
  static watch(raw: unknown): ResponseHead | undefined {
    if (!isNodeResponse(raw)) return undefined;
    const response = raw as WatchedResponse;
    let head = response[WATCH];
    if (head === undefined) {
      // Set before the wrappers are installed: they find the watch here.
      head = new ResponseHead(response);
      response[WATCH] = head;
    }
    return head;
  }

  /** Whether the head carried (or, before it is written, carries so far) a `Set-Cookie`. */
  get setCookie(): boolean {
    return this.#setCookie;
  }

  get isWritten(): boolean {
    return this.#written;
  }

  /** Settles once the head is written (or the response ends or fails without one). */
  get written(): Promise<void> {
    if (this.#whenWritten === undefined) {
      // A response that ended or failed before anyone asked, without a head written through the
      // wrapper.
      if (this.#written || isOver(this.node)) {
        this.#written = true;
        this.#whenWritten = Promise.resolve();
      } else {
        this.#whenWritten = new Promise<void>((resolve) => (this.#settle = resolve));
        const done = (): void => this.#done();
        this.node.once?.('finish', done);
        this.node.once?.('close', done);
      }
    }
    return this.#whenWritten;
  }

  #done(): void {
    if (this.#written) return;
    this.#written = true;
    this.#settle?.();
  }

  static #wrappedSetHeader(this: WatchedResponse, name: string, value: unknown): unknown {
    const head = ResponseHead.#of(this);
    const result = head.#setHeader.call(
      this,
      name,
      head.#setCookie && isCacheControl(name) ? privately(value) : value,
    );
    if (isSetCookie(name)) head.#sawCookie();
    return result;
  }

  static #wrappedAppendHeader(this: WatchedResponse, name: string, value: unknown): unknown {
    const head = ResponseHead.#of(this);
    const result = head.#appendHeader?.call(this, name, value);
    if (isSetCookie(name)) head.#sawCookie();
    return result;
  }

  static #wrappedWriteHead(this: WatchedResponse, ...args: unknown[]): unknown {
    const head = ResponseHead.#of(this);
    // Headers passed to writeHead (Fastify passes all of its own) are written as they are.
    const passed = args.find((arg): arg is object => typeof arg === 'object' && arg !== null);
    if (!head.#written && (hasSetCookie(passed) || this.getHeader('set-cookie') !== undefined)) {
      head.#sawCookie(passed);
    }
    try {
      // Hooks wrapped before this one (on-headers) run inside: their Set-Cookie comes through
      // setHeader.
      return head.#writeHead.apply(this, args);
    } finally {
      head.#done();
    }
  }

  /**
   * The watch of a response whose wrapped method runs (installed with the watch, so always there).
   */
  static #of(response: WatchedResponse): ResponseHead {
    const head = response[WATCH];
    if (head === undefined)
      throw new TypeError('herd-guard: a watched response method was called on another object');
    return head;
  }

  /** Marks the response as carrying a cookie and makes its `Cache-Control`, if any, private. */
  #sawCookie(passed?: object): void {
    this.#setCookie = true;
    const current = this.node.getHeader('cache-control');
    if (current !== undefined) this.#setHeader.call(this.node, 'cache-control', privately(current));
    if (Array.isArray(passed)) {
      // Raw headers: [name, value, name, value, ...].
      for (let i = 0; i + 1 < passed.length; i += 2) {
        if (isCacheControl(passed[i])) passed[i + 1] = privately(passed[i + 1]);
      }
    } else if (passed !== undefined) {
      const fields = passed as Record<string, unknown>;
      for (const name of Object.keys(fields))
        if (isCacheControl(name)) fields[name] = privately(fields[name]);
    }
  }
}

/**
 * A `Cache-Control` for a response that carries one visitor's cookie: kept when it says `private`
 * or `no-store` already, else `private, no-store`.
 */
export function privateCacheControl(cacheControl: string): string {
  return /(^|,)\s*(private|no-store)\s*(=|,|$)/i.test(cacheControl)
    ? cacheControl
    : 'private, no-store';
}

function privately(value: unknown): unknown {
  return value === undefined || value === null ? value : privateCacheControl(String(value));
}

function hasSetCookie(passed: object | undefined): boolean {
  if (passed === undefined) return false;
  if (Array.isArray(passed))
    return passed.some((item, index) => index % 2 === 0 && isSetCookie(item));
  return Object.keys(passed).some(isSetCookie);
}

function isSetCookie(name: unknown): boolean {
  return typeof name === 'string' && name.toLowerCase() === 'set-cookie';
}

function isCacheControl(name: unknown): boolean {
  return typeof name === 'string' && name.toLowerCase() === 'cache-control';
}

/** Whether the response has ended or failed (HTTP/1: `closed`/`destroyed`; HTTP/2: its stream). */
function isOver(node: NodeResponse): boolean {
  return (
    node.headersSent === true ||
    node.writableEnded === true ||
    node.destroyed === true ||
    node.closed === true ||
    node.stream?.destroyed === true
  );
}

function isNodeResponse(value: unknown): value is NodeResponse {
  if (typeof value !== 'object' || value === null) return false;
  const candidate = value as Partial<NodeResponse>;
  return (
    typeof candidate.writeHead === 'function' &&
    typeof candidate.setHeader === 'function' &&
    typeof candidate.getHeader === 'function'
  );
}
