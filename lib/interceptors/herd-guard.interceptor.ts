import {
  type CallHandler,
  type ExecutionContext,
  Injectable,
  type NestInterceptor,
  Optional,
  StreamableFile,
} from '@nestjs/common';
import { HttpAdapterHost, Reflector } from '@nestjs/core';
import { type Observable, from, lastValueFrom } from 'rxjs';
import type { ReadResult } from '../core/herd-engine.js';
import { LoaderFailedError } from '../errors/loader-failed.error.js';
import { HERD_GUARD_ROUTE, HERD_GUARD_SKIP } from '../herd-guard.constants.js';
import { HerdGuardService } from '../herd-guard.service.js';
import type { CachedRouteOptions } from '../interfaces/cached-route-options.interface.js';
import { designReturnType, isClassOrSubclass } from '../decorators/design-metadata.js';
import { routeCacheKey } from '../keys/route-key.js';
import { cacheHeaders } from './cache-headers.js';
import { type RouteConfig, routeConfig } from './route-config.js';

/** Set on a request once an interceptor caches it, so a second binding (route + global) passes through. */
const HANDLED = Symbol('herd-guard.handled');

/** Carries a handler's StreamableFile out of the loader: streams are sent, never cached. */
class UncacheableBody {
  constructor(readonly body: unknown) {}
}

type HttpRequest = {
  method?: string;
  url?: string;
  headers?: Record<string, string | string[] | undefined>;
  raw?: unknown;
  [HANDLED]?: true;
};

/**
 * Caches the bodies of GET (and HEAD) routes with herd-guard: concurrent requests for one key
 * run the handler once, stale bodies are served while one refresh runs, and the response carries
 * `X-Cache`, `Age` and `Cache-Control`. Other methods, non-HTTP contexts, `@SkipCache()` routes
 * and handlers declared to return a `StreamableFile` pass through untouched (the method is
 * checked before any key is built). Only the returned body is cached: status codes and headers
 * set by the handler are not replayed on a hit. Handler errors are never cached and reach the
 * client unchanged (a `NotFoundException` stays a 404).
 *
 * Bind it with `@UseInterceptors(HerdGuardInterceptor)` on a controller or route, or as
 * `APP_INTERCEPTOR`. Customise by extending it: `trackBy`, `scopeKey`, `isRequestCacheable`,
 * `setCacheHeaders` are protected hooks.
 */
@Injectable()
export class HerdGuardInterceptor implements NestInterceptor {
  /** Route options per handler, read once (the policy object must stay the same for the engine's cache). */
  readonly #routes = new WeakMap<object, RouteConfig>();
  /** Whether each handler may be cached at all (`@SkipCache()`, StreamableFile), read once. */
  readonly #cacheable = new WeakMap<object, boolean>();

  constructor(
    protected readonly herd: HerdGuardService,
    protected readonly reflector: Reflector,
    @Optional() protected readonly httpAdapterHost?: HttpAdapterHost,
  ) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> | Promise<Observable<unknown>> {
    // Check: only GET/HEAD routes that may be cached, each request once.
    if (!this.isRequestCacheable(context)) return next.handle();
    const request = context.switchToHttp().getRequest<HttpRequest>();
    if (request[HANDLED] === true) return next.handle();
    // Key: method + path + sorted query (+ vary headers, + scope). Hooks may answer asynchronously.
    const scope = this.scopeKey(context);
    if (scope instanceof Promise) return scope.then((resolved) => this.#withScope(context, next, request, resolved));
    return this.#withScope(context, next, request, scope);
  }

  #withScope(
    context: ExecutionContext,
    next: CallHandler,
    request: HttpRequest,
    scope: string | undefined,
  ): Observable<unknown> | Promise<Observable<unknown>> {
    const key = this.trackBy(context, scope);
    if (key instanceof Promise) return key.then((resolved) => this.#cached(context, next, request, scope, resolved));
    return this.#cached(context, next, request, scope, key);
  }

  /** Read: fresh, stale (one background refresh) or one coalesced run of the handler. */
  #cached(
    context: ExecutionContext,
    next: CallHandler,
    request: HttpRequest,
    scope: string | undefined,
    key: string | undefined,
  ): Observable<unknown> {
    if (key === undefined) return next.handle();
    request[HANDLED] = true;
    const route = this.routeConfigOf(context);
    const tags = typeof route.tags === 'function' ? route.tags(context) : route.tags;
    // Set when this request's own handler runs (not when it joined another request's run).
    let ranHere = false;
    const runHandler = (): Promise<unknown> => {
      ranHere = true;
      return this.#runHandler(next);
    };
    const answer = this.herd.read(key, runHandler, { policy: route.policy, tags }).then(
      (result) => {
        this.setCacheHeaders(context, result, scope !== undefined, route.vary);
        return result.value;
      },
      (error: unknown): unknown => {
        if (error instanceof LoaderFailedError && error.cause instanceof UncacheableBody) {
          // A stream is sent once, by the request that produced it; the others run their own handler,
          // and the route is not cached from now on.
          this.#cacheable.set(context.getHandler(), false);
          return ranHere ? error.cause.body : lastValueFrom(next.handle(), { defaultValue: undefined });
        }
        // The handler's own error (HttpException included), as if no interceptor were there.
        throw error instanceof LoaderFailedError ? error.cause : error;
      },
    );
    return from(answer);
  }

  /**
   * Whether this request may be answered from the cache: an HTTP GET or HEAD, not `@SkipCache()`,
   * and not a handler declared to return a `StreamableFile`. Runs before any key is built.
   */
  protected isRequestCacheable(context: ExecutionContext): boolean {
    if (context.getType() !== 'http') return false;
    const method = this.#methodOf(context.switchToHttp().getRequest<HttpRequest>());
    if (method !== 'GET' && method !== 'HEAD') return false;
    return this.#handlerCacheable(context);
  }

  /**
   * The cache key of this request, or `undefined` to pass it through uncached. Default:
   * {@link routeCacheKey} of the method, URL, ignored query parameters, `vary` headers and `scope`.
   */
  protected trackBy(
    context: ExecutionContext,
    scope: string | undefined,
  ): string | undefined | Promise<string | undefined> {
    const request = context.switchToHttp().getRequest<HttpRequest>();
    const route = this.routeConfigOf(context);
    const vary: Record<string, string | undefined> = {};
    for (const name of route.vary) vary[name] = headerValue(request, name);
    return routeCacheKey({
      method: this.#methodOf(request),
      url: this.#urlOf(request),
      ignoreQuery: route.ignoreQuery,
      vary,
      scope,
    });
  }

  /**
   * The user or tenant this response belongs to (`undefined`: shared by everyone). Default: the
   * route's `@CachedRoute({ scope })`. Override to scope every route, e.g. by `request.user.id`.
   */
  protected scopeKey(context: ExecutionContext): string | undefined | Promise<string | undefined> {
    return this.routeConfigOf(context).scope?.(context);
  }

  /** Sets `X-Cache`, `Age`, `Cache-Control` (see {@link cacheHeaders}) and `Vary`. */
  protected setCacheHeaders(
    context: ExecutionContext,
    result: ReadResult<unknown>,
    scoped: boolean,
    vary: readonly string[],
  ): void {
    const adapter = this.httpAdapterHost?.httpAdapter;
    if (adapter === undefined) return;
    const response: unknown = context.switchToHttp().getResponse();
    for (const [name, value] of Object.entries(cacheHeaders(result, Date.now(), scoped))) {
      adapter.setHeader(response, name, value);
    }
    if (vary.length > 0) adapter.appendHeader(response, 'Vary', vary.join(', '));
  }

  /** The route's `@CachedRoute` options, the handler's laid over its controller's. */
  protected routeConfigOf(context: ExecutionContext): RouteConfig {
    const handler = context.getHandler();
    let config = this.#routes.get(handler);
    if (config === undefined) {
      config = routeConfig(
        this.reflector.get<CachedRouteOptions | undefined>(HERD_GUARD_ROUTE, context.getClass()),
        this.reflector.get<CachedRouteOptions | undefined>(HERD_GUARD_ROUTE, handler),
        `@CachedRoute(${context.getClass().name}.${handler.name})`,
      );
      this.#routes.set(handler, config);
    }
    return config;
  }

  /** Runs the route handler (and the interceptors inside this one) and returns its body. */
  async #runHandler(next: CallHandler): Promise<unknown> {
    const body: unknown = await lastValueFrom(next.handle(), { defaultValue: undefined });
    if (body instanceof StreamableFile) throw new UncacheableBody(body);
    return body;
  }

  /** Not `@SkipCache()` and not declared to return a StreamableFile: decided once per handler. */
  #handlerCacheable(context: ExecutionContext): boolean {
    const handler = context.getHandler();
    let cacheable = this.#cacheable.get(handler);
    if (cacheable === undefined) {
      const targets = [handler, context.getClass()];
      const skipped = this.reflector.getAllAndOverride<boolean | undefined>(HERD_GUARD_SKIP, targets) === true;
      cacheable = !skipped && !declaresStream(context);
      this.#cacheable.set(handler, cacheable);
    }
    return cacheable;
  }

  #methodOf(request: HttpRequest): string {
    const adapter = this.httpAdapterHost?.httpAdapter;
    return String(adapter === undefined ? request.method : adapter.getRequestMethod(request)).toUpperCase();
  }

  #urlOf(request: HttpRequest): string {
    const adapter = this.httpAdapterHost?.httpAdapter;
    return String(adapter === undefined ? request.url : adapter.getRequestUrl(request));
  }
}

function headerValue(request: HttpRequest, name: string): string | undefined {
  const value = request.headers?.[name];
  return Array.isArray(value) ? value.join(', ') : value;
}

/** A handler declared `: StreamableFile` is never cached (its body is a stream). */
function declaresStream(context: ExecutionContext): boolean {
  const prototype = context.getClass().prototype as object;
  return isClassOrSubclass(designReturnType(prototype, context.getHandler().name), StreamableFile);
}
