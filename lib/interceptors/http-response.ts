import type { AbstractHttpAdapter } from '@nestjs/core';

/**
 * The platform response (Express `Response`, Fastify `FastifyReply`), as herd-guard reads and
 * writes it.
 */
type PlatformResponse = {
  statusCode?: unknown;
  headersSent?: unknown;
  raw?: NodeResponse;
  getHeader?(name: string): unknown;
  getHeaders?(): Record<string, unknown>;
  setHeader?(name: string, value: string): unknown;
};

/**
 * The Node.js `ServerResponse` underneath (Express's response is one; Fastify's reply holds it as
 * `raw`).
 */
type NodeResponse = {
  statusCode?: unknown;
  headersSent?: unknown;
  writableFinished?: unknown;
  destroyed?: unknown;
  once?(event: string, listener: () => void): unknown;
};

/**
 * Status and headers of one response, through Nest's HTTP adapter when there is one (Express and
 * Fastify alike), else through the fields both platforms share.
 */
export class HttpResponse {
  constructor(
    private readonly raw: unknown,
    private readonly adapter: AbstractHttpAdapter | undefined,
  ) {}

  /**
   * The Node.js response underneath (Express's response is one; Fastify's reply holds it as `raw`).
   */
  get node(): unknown {
    return (this.raw as PlatformResponse).raw ?? this.raw;
  }

  /** The status the response will be sent with, as it stands now. */
  get status(): number {
    const response = this.raw as PlatformResponse;
    const status = response.statusCode ?? response.raw?.statusCode;
    return typeof status === 'number' ? status : 200;
  }

  set status(status: number) {
    if (this.adapter !== undefined) this.adapter.status(this.raw, status);
    else (this.raw as PlatformResponse).statusCode = status;
  }

  get headersSent(): boolean {
    if (this.adapter !== undefined) return this.adapter.isHeadersSent(this.raw) === true;
    const response = this.raw as PlatformResponse;
    return (response.headersSent ?? response.raw?.headersSent) === true;
  }

  /** Resolves once the response is on its way: headers sent, finished, or the connection closed. */
  sent(): Promise<void> {
    const node = this.node as NodeResponse;
    if (
      this.headersSent ||
      node.writableFinished === true ||
      node.destroyed === true ||
      node.once === undefined
    ) {
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      node.once?.('finish', resolve);
      node.once?.('close', resolve);
    });
  }

  /** A header's value (several values joined with `, `), or `undefined` when not set. */
  header(name: string): string | undefined {
    const value: unknown =
      this.adapter !== undefined
        ? this.adapter.getHeader(this.raw, name)
        : (this.raw as PlatformResponse).getHeader?.(name);
    if (value === undefined || value === null) return undefined;
    return Array.isArray(value) ? value.map(String).join(', ') : String(value);
  }

  /** Every header set so far, by lower-case name (several values joined with `, `). */
  headers(): Record<string, string> {
    const all = (this.raw as PlatformResponse).getHeaders?.() ?? {};
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(all)) {
      if (value === undefined || value === null) continue;
      headers[name.toLowerCase()] = Array.isArray(value)
        ? value.map(String).join(', ')
        : String(value);
    }
    return headers;
  }

  setHeader(name: string, value: string): void {
    this.adapter?.setHeader(this.raw, name, value);
  }

  /**
   * Sets a header to exactly `value`: on the Node.js response when it is the platform's own
   * (Express, whose `set` would add a charset to a Content-Type), else through the adapter.
   */
  setHeaderAsIs(name: string, value: string): void {
    const response = this.raw as PlatformResponse;
    if (
      this.adapter !== undefined &&
      response.raw === undefined &&
      response.setHeader !== undefined
    )
      response.setHeader(name, value);
    else this.setHeader(name, value);
  }
}
