import { ServerResponse } from 'node:http';

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

type WatchedResponse = NodeResponse;

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
 * responses (they find their watch in a `WeakMap`: a property added to Express's response, whose
 * shape differs per request, copies that shape), and the {@link written} promise and its
 * `finish`/`close` listeners exist only once something asks for it (a run fenced on its head).
 * A fresh hit is only {@link guard}ed: one wrapper instead of three.
 */
export class ResponseHead {
  /** One watch per response, however many interceptors look at it. */
  static readonly #watches = new WeakMap<object, ResponseHead>();

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
  /** Read when the fields are watched (`undefined` until then: the response's own is called). */
  #setHeader: NodeResponse['setHeader'] | undefined;
  #appendHeader: NodeResponse['appendHeader'];
  /** Whether `setHeader` and `appendHeader` are wrapped (from the start, or once needed). */
  #fieldsWatched = false;
  /**
   * The response's `writeHead` was wrapped before the watch (on-headers): that hook may set a
   * cookie as the head is written, inside this watch's `writeHead`.
   */
  readonly #hooked: boolean;

  private constructor(private readonly node: WatchedResponse) {
    this.#writeHead = node.writeHead;
    this.#hooked = Object.hasOwn(node, 'writeHead');
    if (node.headersSent === true) {
      this.#setCookie = node.getHeader('set-cookie') !== undefined;
      this.#written = true;
      return;
    }
    node.writeHead = ResponseHead.#wrappedWriteHead;
  }

  /**
   * Watches the Node.js response `raw` (Express's response, Fastify's `reply.raw`) from now until
   * its head is written: every `Set-Cookie`, as it is set; `undefined` for anything else. For a
   * response whose handler runs: {@link setCookie} tells at once whether it carries one.
   */
  static watch(raw: unknown): ResponseHead | undefined {
    const head = ResponseHead.guard(raw);
    if (head !== undefined && !head.#written) head.#watchFields();
    return head;
  }

  /**
   * Guards the head of a response answered from the cache, where nothing reads the watch before
   * the head is written: wraps `writeHead` only, which sees a cookie set before it or passed to it,
   * and wraps `setHeader` and `appendHeader` as the head is written only when a hook wrapped
   * `writeHead` before (it may set a cookie then). Its Cache-Control becomes private alike.
   */
  static guard(raw: unknown): ResponseHead | undefined {
    if (!isNodeResponse(raw)) return undefined;
    let head = ResponseHead.#watches.get(raw);
    if (head === undefined) {
      // Kept before the wrappers are installed: they find the watch there.
      head = new ResponseHead(raw);
      ResponseHead.#watches.set(raw, head);
    }
    return head;
  }

  #watchFields(): void {
    if (this.#fieldsWatched) return;
    this.#fieldsWatched = true;
    const node = this.node;
    this.#setHeader = node.setHeader;
    this.#appendHeader = node.appendHeader;
    node.setHeader = ResponseHead.#wrappedSetHeader;
    if (this.#appendHeader !== undefined) node.appendHeader = ResponseHead.#wrappedAppendHeader;
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
    const result = (head.#setHeader ?? ServerResponse.prototype.setHeader).call(
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
    if (head.#hooked && !head.#written) head.#watchFields();
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
    const head = ResponseHead.#watches.get(response);
    if (head === undefined)
      throw new TypeError('herd-guard: a watched response method was called on another object');
    return head;
  }

  /** Marks the response as carrying a cookie and makes its `Cache-Control`, if any, private. */
  #sawCookie(passed?: object): void {
    this.#setCookie = true;
    const current = this.node.getHeader('cache-control');
    if (current !== undefined) {
      (this.#setHeader ?? this.node.setHeader).call(this.node, 'cache-control', privately(current));
    }
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
  // Express's response and Fastify's `reply.raw` (HTTP/1) are ServerResponses: no field to read.
  if (value instanceof ServerResponse) return true;
  if (typeof value !== 'object' || value === null) return false;
  const candidate = value as Partial<NodeResponse>;
  return (
    typeof candidate.writeHead === 'function' &&
    typeof candidate.setHeader === 'function' &&
    typeof candidate.getHeader === 'function'
  );
}
