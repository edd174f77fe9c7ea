import type { AbstractHttpAdapter } from '@nestjs/core';
import { hostName } from '../keys/host-name.js';
import { HttpResponse } from './http-response.js';

/** The platform request (Express `Request`, Fastify `FastifyRequest`), as herd-guard reads it. */
type PlatformRequest = {
  method?: string;
  url?: string;
  headers?: Record<string, string | string[] | undefined>;
  /** The user a guard attached (Passport and most auth guards put it there). */
  user?: unknown;
  /** Express and Fastify: `X-Forwarded-Proto` when the platform trusts the proxy, else the socket's. */
  protocol?: unknown;
  socket?: { encrypted?: unknown };
};

/** A Host header value: a host (RFC 3986 reg-name or IP literal) and an optional port. */
const HOST = /^[A-Za-z0-9\-._~%!$&'()*+,;=:[\]]+$/;

/** A URI scheme (RFC 3986 §3.1), lower case. */
const SCHEME = /^[a-z][a-z0-9+.-]*$/;

/**
 * Method, URL, host and headers of one request, through Nest's HTTP adapter when there is one
 * (Express and Fastify alike), else through the fields both platforms share.
 */
export class HttpRequest {
  /**
   * One reading per request, however many hooks and interceptors look at it. Kept beside the
   * request, not on it: a property added to Express's request (whose shape differs per request)
   * copies its shape on every request.
   */
  static readonly #reads = new WeakMap<object, HttpRequest>();
  /** Read on first use: the method is asked for before anything else, and again for the key. */
  #method: string | undefined;
  /** Set by {@link markHandled}, never unset. */
  #handled = false;
  /** Made on first use by {@link response}. */
  #response: HttpResponse | undefined;

  private constructor(
    private readonly raw: PlatformRequest,
    private readonly adapter: AbstractHttpAdapter | undefined,
  ) {}

  /** The reading of the platform request `raw`, made on first use and kept on the request. */
  static of(raw: unknown, adapter: AbstractHttpAdapter | undefined): HttpRequest {
    const request = raw as PlatformRequest;
    let read = HttpRequest.#reads.get(request);
    if (read === undefined) {
      read = new HttpRequest(request, adapter);
      HttpRequest.#reads.set(request, read);
    }
    return read;
  }

  /** Upper case (`GET`). */
  get method(): string {
    this.#method ??= String(
      this.adapter === undefined ? this.raw.method : this.adapter.getRequestMethod(this.raw),
    ).toUpperCase();
    return this.#method;
  }

  /** The URL as sent: path and query. */
  get url(): string {
    return String(this.adapter === undefined ? this.raw.url : this.adapter.getRequestUrl(this.raw));
  }

  /**
   * The host the request was sent to, for the key: the host name of its `Host` (`:authority` in
   * HTTP/2), lower case and without the port (Nest routes by host name, not port), and the host
   * name Nest routes by when that differs (`X-Forwarded-Host` behind a trusted proxy). `undefined`
   * when there is no Host, or one no client would send (not a host[:port]): such requests are not
   * cached.
   */
  get host(): string | undefined {
    const host = this.header('host') ?? this.header(':authority');
    if (host === undefined || !HOST.test(host)) return undefined;
    const name = hostName(host);
    if (name === '') return undefined;
    // Nest routes by another name than the Host only behind a proxy that forwards one.
    if (this.header('x-forwarded-host') === undefined && this.header('forwarded') === undefined)
      return name;
    const routed: unknown = this.adapter?.getRequestHostname(this.raw);
    if (typeof routed !== 'string' || routed === '') return name;
    const routedName = hostName(routed);
    // A space never occurs in a valid Host, so the two names cannot run into each other.
    return routedName === name ? name : `${name} ${routedName}`;
  }

  /**
   * The scheme the request was sent over, for the key, lower case: `https` over TLS, else `http`,
   * or the `X-Forwarded-Proto` of a proxy the platform trusts (Express `trust proxy`, Fastify
   * `trustProxy`), as the platform reports it to handlers (`request.protocol`). `undefined` when
   * that is no scheme: such requests are not cached.
   */
  get scheme(): string | undefined {
    const socket = this.raw.socket?.encrypted === true ? 'https' : 'http';
    // Only a forwarded scheme can make the platform report another than the socket's.
    if (this.header('x-forwarded-proto') === undefined) return socket;
    const reported = this.raw.protocol;
    if (typeof reported !== 'string') return socket;
    const scheme = reported.trim().toLowerCase();
    return SCHEME.test(scheme) ? scheme : undefined;
  }

  /**
   * Whether the request is one user's: it carries an `Authorization` or a `Cookie` header or one of
   * `credentialHeaders` (lower case), or a guard attached a user to it. Read when asked: guards
   * run before interceptors, so the user is there by then.
   */
  isPrivate(credentialHeaders: readonly string[]): boolean {
    if (this.#carries('authorization') || this.#carries('cookie')) return true;
    for (const name of credentialHeaders) if (this.#carries(name)) return true;
    // A user is an object (or at least truthy): Fastify's `decorateRequest('user', '')` leaves ''
    // on every request a guard did not fill.
    return Boolean(this.raw.user);
  }

  /** Whether the request has the header `name` with a value (an empty one carries nothing). */
  #carries(name: string): boolean {
    const value = this.header(name);
    return value !== undefined && value !== '';
  }

  /**
   * A header's value (several values joined with `, `) by lower-case name, or `undefined` when
   * absent.
   */
  header(name: string): string | undefined {
    const value = this.raw.headers?.[name];
    return Array.isArray(value) ? value.join(', ') : value;
  }

  /**
   * Whether an interceptor caches this request already: a second binding (route + global) passes it
   * through.
   */
  get handled(): boolean {
    return this.#handled;
  }

  /**
   * The response to this request (`raw`, the platform response), as herd-guard reads and writes
   * it: one reading per request, however many hooks look at it.
   */
  response(raw: unknown, adapter: AbstractHttpAdapter | undefined): HttpResponse {
    this.#response ??= new HttpResponse(raw, adapter);
    return this.#response;
  }

  markHandled(): void {
    this.#handled = true;
  }
}
