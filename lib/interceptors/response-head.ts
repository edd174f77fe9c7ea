/** The Node.js response methods the watch wraps (`ServerResponse`, or HTTP/2's compatibility response). */
type NodeResponse = {
  headersSent?: unknown;
  writeHead(...args: unknown[]): unknown;
  setHeader(name: string, value: unknown): unknown;
  appendHeader?(name: string, value: unknown): unknown;
  getHeader(name: string): unknown;
  once?(event: string, listener: () => void): unknown;
};

/** One watch per response, however many interceptors look at it. */
const WATCH = Symbol('herd-guard.response-head');

/**
 * The head of one response as it goes out. A `Set-Cookie` may be added at the very last moment,
 * after the handler and the interceptors ran: express-session does it when the head is written
 * (through on-headers, which wraps `writeHead`), @fastify/session in an `onSend` hook (Fastify then
 * passes its headers to `writeHead`). The watch wraps the response's `writeHead`, `setHeader` and
 * `appendHeader` to see such a cookie, however late, and then
 * - makes a `Cache-Control` that would let a shared cache store the response `private, no-store`
 *   (the response carries one visitor's cookie), and
 * - reports, once the head is written, that it carried a cookie.
 */
export class ResponseHead {
  /** Settles once the head is written (or the response ends or fails without one). */
  readonly written: Promise<void>;
  /** Written by the wrappers when a `Set-Cookie` is set or passed to `writeHead`; never unset. */
  #setCookie = false;
  /** Written once, by the first `writeHead` (or `finish`/`close`). */
  #written = false;

  private constructor(private readonly node: NodeResponse) {
    let settle!: () => void;
    this.written = new Promise<void>((resolve) => (settle = resolve));
    const done = (): void => {
      if (this.#written) return;
      this.#written = true;
      settle();
    };
    if (node.headersSent === true) {
      this.#setCookie = node.getHeader('set-cookie') !== undefined;
      done();
      return;
    }
    this.#wrap(done);
    node.once?.('finish', done);
    node.once?.('close', done);
  }

  /** Watches the Node.js response `raw` (Express's response, Fastify's `reply.raw`); `undefined` for anything else. */
  static watch(raw: unknown): ResponseHead | undefined {
    if (!isNodeResponse(raw)) return undefined;
    const watched = (raw as { [WATCH]?: ResponseHead })[WATCH];
    if (watched !== undefined) return watched;
    const head = new ResponseHead(raw);
    Object.defineProperty(raw, WATCH, { value: head });
    return head;
  }

  /** Whether the head carried (or, before it is written, carries so far) a `Set-Cookie`. */
  get setCookie(): boolean {
    return this.#setCookie;
  }

  get isWritten(): boolean {
    return this.#written;
  }

  #wrap(done: () => void): void {
    const node = this.node;
    const { writeHead, setHeader, appendHeader } = node;
    const sawCookie = (passed?: object): void => this.#sawCookie(setHeader, passed);
    const cookieSeen = (): boolean => this.#setCookie;
    const written = (): boolean => this.#written;
    node.setHeader = function (this: NodeResponse, name: string, value: unknown) {
      const result = setHeader.call(this, name, cookieSeen() && isCacheControl(name) ? privately(value) : value);
      if (isSetCookie(name)) sawCookie();
      return result;
    };
    if (appendHeader !== undefined) {
      node.appendHeader = function (this: NodeResponse, name: string, value: unknown) {
        const result = appendHeader.call(this, name, value);
        if (isSetCookie(name)) sawCookie();
        return result;
      };
    }
    node.writeHead = function (this: NodeResponse, ...args: unknown[]) {
      // Headers passed to writeHead (Fastify passes all of its own) are written as they are.
      const passed = args.find((arg): arg is object => typeof arg === 'object' && arg !== null);
      if (!written() && (hasSetCookie(passed) || node.getHeader('set-cookie') !== undefined)) sawCookie(passed);
      try {
        // Hooks wrapped before this one (on-headers) run inside: their Set-Cookie comes through setHeader.
        return writeHead.apply(this, args);
      } finally {
        done();
      }
    };
  }

  /** Marks the response as carrying a cookie and makes its `Cache-Control`, if any, private. */
  #sawCookie(setHeader: NodeResponse['setHeader'], passed?: object): void {
    this.#setCookie = true;
    const current = this.node.getHeader('cache-control');
    if (current !== undefined) setHeader.call(this.node, 'cache-control', privately(current));
    if (Array.isArray(passed)) {
      // Raw headers: [name, value, name, value, ...].
      for (let i = 0; i + 1 < passed.length; i += 2) {
        if (isCacheControl(passed[i])) passed[i + 1] = privately(passed[i + 1]);
      }
    } else if (passed !== undefined) {
      const fields = passed as Record<string, unknown>;
      for (const name of Object.keys(fields)) if (isCacheControl(name)) fields[name] = privately(fields[name]);
    }
  }
}

/**
 * A `Cache-Control` for a response that carries one visitor's cookie: kept when it says `private`
 * or `no-store` already, else `private, no-store`.
 */
export function privateCacheControl(cacheControl: string): string {
  return /(^|,)\s*(private|no-store)\s*(=|,|$)/i.test(cacheControl) ? cacheControl : 'private, no-store';
}

function privately(value: unknown): unknown {
  return value === undefined || value === null ? value : privateCacheControl(String(value));
}

function hasSetCookie(passed: object | undefined): boolean {
  if (passed === undefined) return false;
  if (Array.isArray(passed)) return passed.some((item, index) => index % 2 === 0 && isSetCookie(item));
  return Object.keys(passed).some(isSetCookie);
}

function isSetCookie(name: unknown): boolean {
  return typeof name === 'string' && name.toLowerCase() === 'set-cookie';
}

function isCacheControl(name: unknown): boolean {
  return typeof name === 'string' && name.toLowerCase() === 'cache-control';
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
