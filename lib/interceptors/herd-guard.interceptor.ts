import {
  type CallHandler,
  type ExecutionContext,
  GatewayTimeoutException,
  Injectable,
  type NestInterceptor,
  Optional,
  ServiceUnavailableException,
} from '@nestjs/common';
import { HttpAdapterHost, ModuleRef, Reflector } from '@nestjs/core';
import {
  type Observable,
  concatMap,
  defaultIfEmpty,
  from,
  map,
  mergeMap,
  of,
  takeLast,
  tap,
} from 'rxjs';
import { PASS_MAX_MS } from '../core/fill-protocol.js';
import type { LoadContext, ReadOptions, ReadResult } from '../core/herd-engine.js';
import type { ResolvedPolicy } from '../core/policy.js';
import { assertStorable } from '../core/serializers.js';
import { ConfigurationError } from '../errors/configuration.error.js';
import { KeySerializationError } from '../errors/key-serialization.error.js';
import { LoaderFailedError } from '../errors/loader-failed.error.js';
import { LoaderTimeoutError } from '../errors/loader-timeout.error.js';
import { UpstreamUnavailableError } from '../errors/upstream-unavailable.error.js';
import { WaitTimeoutError } from '../errors/wait-timeout.error.js';
import { HERD_GUARD_ROUTE, HERD_GUARD_SKIP } from '../herd-guard.constants.js';
import { DEFAULT_CACHE_NAME, getHerdGuardToken } from '../herd-guard.names.js';
import { HerdGuardService } from '../herd-guard.service.js';
import type { CachedRouteOptions } from '../interfaces/cached-route-options.interface.js';
import { routeCacheKey, routePathTag } from '../keys/route-key.js';
import { type RouteConfig, routeConfig } from '../metadata/route-config.js';
import {
  CACHEABLE_STATUSES,
  type CachedResponse,
  cacheControlLifetime,
  expiresLifetimeMs,
  forbidsStoring,
} from './cached-response.js';
import { EntryCacheHeaders } from './entry-cache-headers.js';
import { HeadFences } from './head-fences.js';
import { HttpRequest } from './http-request.js';
import { HttpResponse } from './http-response.js';
import { platformBody } from './platform-bodies.js';
import { ReplayPlans } from './replay-plans.js';
import { RequestRead } from './request-read.js';
import { type HandlerOutput, ResponseExchange } from './response-exchange.js';
import { ResponseHead } from './response-head.js';
import {
  type RouteHandler,
  describeRouteHandler,
  finalLocation,
  finalStatus,
  isStreamBody,
} from './route-handler.js';
import { UncacheableResponse } from './uncacheable-response.js';
import { UnstorableKeys } from './unstorable-keys.js';
import { mergeVary, varyNames } from './vary.js';
import { UNSAFE_METHODS, isDoneWrite, sameOriginPath } from './write-targets.js';

/** What the interceptor stores for a route: a response, or a cached "not found". */
type StoredResponse = CachedResponse | null | undefined;

/** A request's cache key and what it was built with. */
interface KeyedRequest {
  /** `undefined`: the request passes through uncached. */
  readonly key: string | undefined;
  readonly scope: string | undefined;
  /** The request headers the key includes, lower case. */
  readonly vary: readonly string[];
  readonly response: HttpResponse;
}

/**
 * One run of the handler as its key's loader, and what its response must agree with to be stored.
 */
interface HandlerRun {
  /** The cache the route's entries are in. */
  readonly cache: HerdGuardService;
  readonly key: string;
  /**
   * The route is scoped: its entries belong to one user, and `Cache-Control: private` is allowed.
   */
  readonly scoped: boolean;
  /** The request headers the key includes, lower case. */
  readonly vary: readonly string[];
  /** The response of the request the run is for. */
  readonly exchange: ResponseExchange;
  /** Its head as it goes out (`undefined` off Node.js), watched from the start of the run. */
  readonly head: ResponseHead | undefined;
  /** The engine's context of this load, where the response's own TTL is chosen. */
  readonly loading: LoadContext<unknown>;
  /** The route takes the soft TTL from the handler's `Cache-Control`. */
  readonly ttlFromCacheControl: boolean;
  /** The route's policy as the engine resolves it: the serializer its entries are stored with. */
  readonly policy: ResolvedPolicy;
}

/** The request headers the key of a handler's requests includes, kept for the next request. */
interface VaryList {
  /** What it was made from: the route's `vary`, the `Vary` set before the handler, `varies`. */
  readonly route: readonly string[];
  readonly header: string | undefined;
  readonly varies: number;
  /** Lower case, without repeats. */
  readonly names: readonly string[];
}

/** Per handler, read once: its identity in keys and whether it may be cached at all. */
interface HandlerState extends RouteHandler {
  /**
   * Written (to false, never back) once a run shows the handler returns streams, or its response
   * got a `Set-Cookie` as it went out: later requests pass through at once.
   */
  cacheable: boolean;
  /**
   * Request headers (lower case) the handler's responses named in `Vary` though the key did not
   * include them. Added to by a run whose response was not stored for that reason; only grows, so
   * later keys include them.
   */
  readonly varies: Set<string>;
  /** The last vary list made for the handler's requests (see `#varyOf`). */
  varyList: VaryList | undefined;
}

/**
 * Caches the responses of GET and HEAD routes as a shared cache (RFC 9111): concurrent requests
 * for one key run the handler once, stale responses are served while one refresh runs, and private
 * or unstorable responses pass through; a successful POST, PUT, PATCH or DELETE deletes the
 * cached GET responses of its path. Bind it with `@UseInterceptors` or `APP_INTERCEPTOR`;
 * customise it through the protected hooks. How it decides:
 * docs/nestjs.md#how-the-interceptor-works.
 */
@Injectable()
export class HerdGuardInterceptor implements NestInterceptor {
  /**
   * Route options per handler, read once (the policy object must stay the same for the engine's
   * cache).
   */
  readonly #routes = new WeakMap<object, RouteConfig>();
  readonly #handlers = new WeakMap<object, HandlerState>();
  readonly #fences = new HeadFences();
  /** The `X-Cache`, `Age` and `Cache-Control` of the answers from each entry, made once a second. */
  readonly #cacheHeaders = new EntryCacheHeaders();
  /** The read options of routes whose tags are a list: one object per route, not per request. */
  readonly #readOptions = new WeakMap<RouteConfig, ReadOptions>();
  /** Made on first use: the HTTP adapter may be set after the interceptor is made. */
  #replays: ReplayPlans | undefined;
  /** The named caches routes asked for (`@CachedRoute({ cache })`), looked up on first use. */
  readonly #namedCaches = new Map<string, HerdGuardService>();
  /** Keys whose last body the serializer refused: added to by `#toStored`, read per request. */
  readonly #unstorable = new UnstorableKeys();

  /**
   * `herd` is the default cache; `moduleRef` finds the named caches of routes that ask for one (a
   * subclass that uses them passes it on).
   */
  constructor(
    protected readonly herd: HerdGuardService,
    protected readonly reflector: Reflector,
    @Optional() protected readonly httpAdapterHost?: HttpAdapterHost,
    @Optional() protected readonly moduleRef?: ModuleRef,
  ) {}

  intercept(
    context: ExecutionContext,
    next: CallHandler,
  ): Observable<unknown> | Promise<Observable<unknown>> {
    // Writes invalidate the path's entries; only GET/HEAD requests of handlers whose responses can
    // be replayed are cached; each request once.
    if (context.getType() === 'http') {
      const request = this.#request(context);
      if (UNSAFE_METHODS.has(request.method) && !request.handled)
        return this.#invalidating(context, next, request);
    }
    if (!this.isRequestCacheable(context)) return next.handle();
    const request = this.#request(context);
    if (request.handled) return next.handle();
    // Key: handler, scheme, host name, path, sorted query (+ vary headers, + scope). Hooks may answer
    // asynchronously.
    const scope = this.scopeKey(context);
    if (scope instanceof Promise) {
      return scope.then((resolved) =>
        this.#withScope(context, next, request, scopeOf(context, resolved)),
      );
    }
    return this.#withScope(context, next, request, scopeOf(context, scope));
  }

  #withScope(
    context: ExecutionContext,
    next: CallHandler,
    request: HttpRequest,
    scope: string | undefined,
  ): Observable<unknown> | Promise<Observable<unknown>> {
    // Private: a request with credentials shares no entry unless the route says its response is the
    // same for all.
    if (
      scope === undefined &&
      !this.routeConfigOf(context).shareAcrossUsers &&
      this.hasCredentials(context)
    ) {
      return next.handle();
    }
    // The request headers the key includes; `Vary: *` set before the handler (a middleware) means
    // none would do.
    const response = this.#response(context);
    const vary = this.#varyOf(context, response);
    if (vary.includes('*')) return next.handle();
    const key = this.trackBy(context, scope);
    if (key instanceof Promise) {
      return key.then((resolved) =>
        this.#cached(context, next, request, { key: resolved, scope, vary, response }),
      );
    }
    return this.#cached(context, next, request, { key, scope, vary, response });
  }

  /** Read: fresh, stale (one background refresh) or one coalesced run of the handler. */
  #cached(
    context: ExecutionContext,
    next: CallHandler,
    request: HttpRequest,
    { key, scope, vary, response }: KeyedRequest,
  ): Observable<unknown> | Promise<Observable<unknown>> {
    if (key === undefined) return next.handle();
    if (this.#unstorable.has(key)) return next.handle();
    const exchange = new ResponseExchange(response);
    const scoped = scope !== undefined;
    // A Cache-Control set before the handler runs (`@Header`, a middleware) may forbid storing
    // already.
    if (forbidsStoring(exchange.preparedCacheControl, scoped)) return next.handle();
    request.markHandled();
    const route = this.routeConfigOf(context);
    const cache = this.#cacheOf(route);
    const read = new RequestRead();
    const load = (loading: LoadContext<unknown>): Observable<StoredResponse> => {
      read.handlerStarted();
      // A Set-Cookie added as the response goes out makes it private, and keeps its run out of the
      // cache: the head is watched from before the handler runs (a hit never runs it).
      const head = ResponseHead.watch(response.node);
      const { ttlFromCacheControl } = route;
      const policy = cache.engine.policyFor(route.policy);
      // Under its path's tag, so a write to the path finds it whatever its query, vary or scope.
      loading.setPolicy({ tags: [routePathTag(request)] });
      const run = {
        cache,
        key,
        scoped,
        vary,
        exchange,
        head,
        loading,
        ttlFromCacheControl,
        policy,
      };
      return this.#load(context, next, run, loading.stale).pipe(
        tap({ error: (error: unknown) => read.handlerFailed(error) }),
      );
    };
    return cache.read(key, load, this.#readOptionsOf(context, route)).then(
      (result) => {
        // The engine served the others a stale entry (fail-safe); this request keeps what its
        // handler sent.
        const own = read.own;
        if (own !== undefined && !own.failure) return of(own.body);
        // Another request's run whose head is still going out may yet prove private: wait for its
        // verdict.
        const fence = read.ranHere ? undefined : this.#fences.verdict(key);
        if (fence === undefined) return of(this.#reply(context, exchange, result, scoped, vary));
        return fence.then((servable) =>
          servable ? of(this.#reply(context, exchange, result, scoped, vary)) : next.handle(),
        );
      },
      (error: unknown): Observable<unknown> => {
        const cause = error instanceof LoaderFailedError ? error.cause : error;
        if (cause instanceof UncacheableResponse)
          return read.ranHere ? of(cause.body) : next.handle();
        // The handler's own error (HttpException included), as if no interceptor were there.
        throw httpErrorFor(cause);
      },
    );
  }

  /**
   * Runs a write's handler; once it answers 2xx or 3xx, and before that answer goes out, deletes
   * the GET entries of its path and of its same-origin `Location` and `Content-Location` (RFC 9111
   * §4.4), on every pod that shares the store. A handler's error (4xx, 5xx) invalidates nothing.
   * Deleted rather than expired: a stale entry would answer the writer's next read with what it
   * just replaced.
   */
  #invalidating(
    context: ExecutionContext,
    next: CallHandler,
    request: HttpRequest,
  ): Observable<unknown> {
    if (!this.routeConfigOf(context).invalidateOnWrite) return next.handle();
    request.markHandled();
    return next
      .handle()
      .pipe(
        concatMap((body: unknown, index) =>
          index === 0
            ? from(this.#invalidateWritten(context, request, body)).pipe(map(() => body))
            : of(body),
        ),
      );
  }

  async #invalidateWritten(
    context: ExecutionContext,
    request: HttpRequest,
    body: unknown,
  ): Promise<void> {
    const response = this.#response(context);
    const handler = this.#handlerOf(context);
    if (!isDoneWrite(finalStatus(handler, body, response.status))) return;
    const { scheme, host, url } = request;
    const tags = new Set([routePathTag(request)]);
    if (scheme !== undefined && host !== undefined) {
      const queryAt = url.indexOf('?');
      const path = queryAt === -1 ? url : url.slice(0, queryAt);
      const references = [
        finalLocation(handler, body, response.header('location')),
        response.header('content-location'),
      ];
      for (const reference of references) {
        const target =
          reference === undefined
            ? undefined
            : sameOriginPath(reference, scheme, host.split(' '), path);
        if (target !== undefined) tags.add(routePathTag({ scheme, host, url: target }));
      }
    }
    const cache = this.#cacheOf(this.routeConfigOf(context));
    // A store that fails must not fail a write that is done: its entries then expire with their
    // TTL.
    await Promise.all([...tags].map((tag) => cache.deleteTag(tag).catch(() => undefined)));
  }

  /**
   * Answers this request from `result`: its stored status and headers, the cache headers; returns
   * the body. Its head is watched as it goes out, for a late `Set-Cookie`: only guarded on a fresh
   * hit (no run of the handler reads the watch; see {@link ResponseHead.guard}).
   */
  #reply(
    context: ExecutionContext,
    exchange: ResponseExchange,
    result: ReadResult<unknown>,
    scoped: boolean,
    vary: readonly string[],
  ): unknown {
    if (result.path === 'fresh') ResponseHead.guard(exchange.response.node);
    else ResponseHead.watch(exchange.response.node);
    const body = exchange.replay(result.value, this.#replayPlans);
    this.setCacheHeaders(context, result, scoped, vary);
    return body;
  }

  /** The options of a route's reads: made per request only when its tags are a function. */
  #readOptionsOf(context: ExecutionContext, route: RouteConfig): ReadOptions {
    if (typeof route.tags === 'function')
      return { policy: route.policy, tags: route.tags(context) };
    let options = this.#readOptions.get(route);
    if (options === undefined) {
      options = { policy: route.policy, tags: route.tags };
      this.#readOptions.set(route, options);
    }
    return options;
  }

  /**
   * Runs the handler (and the interceptors inside this one) and turns what it sent into what is
   * stored: a {@link CachedResponse}, `undefined` or `null` for "not found", or an
   * {@link UncacheableResponse} thrown.
   * The engine unsubscribes when the load is aborted (loader timeout, application shutdown).
   */
  #load(
    context: ExecutionContext,
    next: CallHandler,
    run: HandlerRun,
    refreshing: unknown,
  ): Observable<StoredResponse> {
    const { exchange } = run;
    return from(exchange.beforeRun(refreshing)).pipe(
      mergeMap((baseline) =>
        next.handle().pipe(
          takeLast(1),
          defaultIfEmpty(undefined),
          map((body: unknown) => {
            const handler = this.#handlerOf(context);
            const handled = exchange.handlerOutput(baseline);
            const output = { ...handled, status: finalStatus(handler, body, handled.status) };
            if (isStreamBody(body)) {
              handler.cacheable = false;
              throw new UncacheableResponse(body, output.status, 'a stream');
            }
            if (output.sentByHandler)
              throw new UncacheableResponse(body, output.status, 'sent by the handler');
            const stored = this.#toStored(body, output, run, handler);
            this.#fenceOnHead(
              run,
              handler,
              () => new UncacheableResponse(body, output.status, 'Set-Cookie'),
            );
            return stored;
          }),
        ),
      ),
    );
  }

  /**
   * A run is stored only if its request's response goes out without `Set-Cookie`. A refresh that
   * runs after its request was answered from the cache knows already (throws `uncacheable()`);
   * otherwise the entry is stored before that head is written, so it is fenced until then and, when
   * the head carries a cookie, deleted, and the handler is not cached by this process any more (a
   * session middleware sets cookies on its responses).
   */
  #fenceOnHead(
    { cache, key, head }: HandlerRun,
    handler: HandlerState,
    uncacheable: () => UncacheableResponse,
  ): void {
    if (head === undefined) return;
    if (head.isWritten) {
      if (head.setCookie) throw uncacheable();
      return;
    }
    this.#fences.add(key, head, async () => {
      handler.cacheable = false;
      // A store error is the engine's to report (events, metrics); the entry then expires with its
      // TTL.
      await cache.delete(key).catch(() => undefined);
    });
  }

  /**
   * What to store for a body the handler sent: the answer as this pod's platform sends it (see
   * `PlatformBody`); throws {@link UncacheableResponse} when it may not be stored.
   */
  #toStored(
    body: unknown,
    { status, headers, contentType }: HandlerOutput,
    { key, exchange, scoped, vary, loading, ttlFromCacheControl, policy }: HandlerRun,
    handler: HandlerState,
  ): StoredResponse {
    if (!CACHEABLE_STATUSES.has(status))
      throw new UncacheableResponse(body, status, `status ${status}`);
    // Vary (RFC 9111 §4.1): the entry may serve only requests whose listed headers match, so each
    // must be in the key.
    const answered = varyNames(exchange.response.header('vary'));
    if (answered.includes('*')) throw new UncacheableResponse(body, status, 'Vary: *');
    const unkeyed = answered.filter((name) => !vary.includes(name));
    if (unkeyed.length > 0) {
      for (const name of unkeyed) handler.varies.add(name);
      throw new UncacheableResponse(
        body,
        status,
        `Vary names ${unkeyed.join(', ')}, not in the key yet`,
      );
    }
    const cacheControl = headers['cache-control'] ?? exchange.preparedCacheControl;
    if (forbidsStoring(cacheControl, scoped)) {
      throw new UncacheableResponse(body, status, `Cache-Control: ${cacheControl ?? ''}`);
    }
    // An Expires in the past (or `Expires: 0`) without a max-age says the response is stale already.
    const expires = headers['expires'] ?? exchange.preparedExpires;
    const date = exchange.response.header('date');
    const expiresMs = expiresLifetimeMs(expires, cacheControl, date, Date.now());
    if (expiresMs !== undefined && expiresMs <= 0)
      throw new UncacheableResponse(body, status, `Expires: ${expires ?? ''}`);
    if (exchange.response.header('set-cookie') !== undefined) {
      throw new UncacheableResponse(body, status, 'Set-Cookie');
    }
    const lifetime = ttlFromCacheControl
      ? cacheControlLifetime(cacheControl, expiresMs)
      : undefined;
    if (lifetime !== undefined) {
      loading.setPolicy(
        lifetime.staleMs === undefined
          ? { soft: lifetime.softMs }
          : { soft: lifetime.softMs, hard: lifetime.softMs + lifetime.staleMs },
      );
    }
    const sent = this.#replayPlans.platform.sent(body, contentType, status);
    if (sent === undefined)
      throw new UncacheableResponse(body, status, 'a body the platform answers with an error');
    // "Not found" with the usual status: a negative entry, kept for negativeTtl. `undefined` is
    // answered with an empty body, `null` as JSON (Fastify).
    if (
      (sent.body === null || sent.body === undefined) &&
      status === exchange.preparedStatus &&
      Object.keys(headers).length === 0
    ) {
      return sent.body;
    }
    const replayed =
      sent.contentType === undefined ? headers : { ...headers, 'content-type': sent.contentType };
    const stored: { status: number; body?: unknown; headers?: Record<string, string> } = { status };
    if (sent.body !== undefined) stored.body = sent.body;
    if (Object.keys(replayed).length > 0) stored.headers = replayed;
    // Refused by the engine, it would fail every request (and be shared as a failure): it answers
    // its own request instead, and the key's requests pass through for as long as a pass lasts.
    try {
      assertStorable(key, stored, policy.serializer);
    } catch (error) {
      this.#unstorable.add(key, Math.min(policy.softMs, PASS_MAX_MS));
      throw new UncacheableResponse(body, status, 'a body the serializer refuses', {
        cause: error,
      });
    }
    return stored;
  }

  /** How this pod's platform sends bodies, and the plans of the entries it answers from. */
  get #replayPlans(): ReplayPlans {
    this.#replays ??= new ReplayPlans(platformBody(this.httpAdapterHost?.httpAdapter?.getType()));
    return this.#replays;
  }

  /**
   * Whether this request may be answered from the cache: an HTTP GET or HEAD, not `@SkipCache()`,
   * and a handler whose responses can be replayed (not SSE, `@Res()` or a declared
   * `StreamableFile`).
   * Runs before any key is built.
   */
  protected isRequestCacheable(context: ExecutionContext): boolean {
    if (context.getType() !== 'http') return false;
    const { method } = this.#request(context);
    if (method !== 'GET' && method !== 'HEAD') return false;
    return this.#handlerOf(context).cacheable;
  }

  /**
   * Whether the request belongs to one user: then it is cached only per user (`scope`) or on routes
   * with `shareAcrossUsers`. Default: it carries `Authorization`, `Cookie` or a header the route's
   * cache names in `credentialHeaders`, or a guard set `request.user`
   * (docs/nestjs.md#private-requests). Override to ignore, say, a consent cookie.
   */
  protected hasCredentials(context: ExecutionContext): boolean {
    const { credentialHeaders } = this.#cacheOf(this.routeConfigOf(context));
    return this.#request(context).isPrivate(credentialHeaders);
  }

  /**
   * The cache key of this request, or `undefined` to pass it through uncached. Default:
   * {@link routeCacheKey} of the method, handler, scheme, host name, URL, ignored query parameters, the
   * values of the request headers the response varies by (the route's `vary`, and those the handler
   * names in its `Vary` response header) and `scope`. A response whose `Vary` names a header the
   * default key leaves out is not stored: an override should key by those headers too.
   */
  protected trackBy(
    context: ExecutionContext,
    scope: string | undefined,
  ): string | undefined | Promise<string | undefined> {
    const request = this.#request(context);
    const { host, scheme } = request;
    // Without a Host (HTTP/1.0) the URL alone does not say which site was asked for.
    if (host === undefined || scheme === undefined) return undefined;
    const route = this.routeConfigOf(context);
    const vary: Record<string, string | undefined> = {};
    for (const name of this.#varyOf(context, this.#response(context)))
      vary[name] = request.header(name);
    return routeCacheKey({
      method: request.method,
      handler: this.#handlerOf(context).id,
      host,
      scheme,
      url: request.url,
      ignoreQuery: route.ignoreQuery,
      vary,
      scope,
    });
  }

  /**
   * The user or tenant this response belongs to (`undefined`: shared by everyone). Default: the
   * route's `@CachedRoute({ scope })`. Override to scope every route, e.g. by `request.user.id`.
   * A number is keyed by its decimal form; any other value fails the request (see `scope`).
   */
  protected scopeKey(
    context: ExecutionContext,
  ): string | number | undefined | Promise<string | number | undefined> {
    return this.routeConfigOf(context).scope?.(context);
  }

  /**
   * Sets `X-Cache`, `Age`, and `Cache-Control` (see {@link cacheHeaders}) unless the response has
   * one already (the handler's own, from `@Header` or replayed), which is sent as written; adds to
   * `Vary` the request headers the key includes (`vary`, lower case) that it does not list yet.
   */
  protected setCacheHeaders(
    context: ExecutionContext,
    result: ReadResult<unknown>,
    scoped: boolean,
    vary: readonly string[],
  ): void {
    if (this.httpAdapterHost?.httpAdapter === undefined) return;
    const response = this.#response(context);
    const written = response.header('cache-control') !== undefined;
    for (const [name, value] of this.#cacheHeaders.of(result, Date.now(), scoped)) {
      if (name !== 'Cache-Control' || !written) response.setHeaderAsIs(name, value);
    }
    const header = response.header('vary');
    const merged = mergeVary(header, vary);
    if (merged !== header && merged !== undefined) response.setHeaderAsIs('Vary', merged);
  }

  /** The cache of a route: the default one, or the one its `cache` option names. */
  #cacheOf(route: RouteConfig): HerdGuardService {
    if (route.cache === undefined || route.cache === DEFAULT_CACHE_NAME) return this.herd;
    let cache = this.#namedCaches.get(route.cache);
    if (cache === undefined) {
      if (this.moduleRef === undefined) {
        throw new ConfigurationError(
          'cache',
          `HerdGuardInterceptor needs a ModuleRef to find the cache "${route.cache}": pass it to its constructor`,
        );
      }
      // The module checked at start that the app has this cache.
      cache = this.moduleRef.get<HerdGuardService>(getHerdGuardToken(route.cache), {
        strict: false,
      });
      this.#namedCaches.set(route.cache, cache);
    }
    return cache;
  }

  /**
   * The route's `@CachedRoute` options, the handler's laid over its controller's. A handler that
   * takes `@Res({ passthrough: true })` sets the status and headers on the response itself, which
   * a background refresh would do on a response already answered from the cache: its stale entries
   * are refreshed in the foreground (`staleWhileRevalidate` and `earlyRefresh` off unless set).
   */
  protected routeConfigOf(context: ExecutionContext): RouteConfig {
    const handler = context.getHandler();
    let config = this.#routes.get(handler);
    if (config === undefined) {
      config = routeConfig(
        this.reflector.get<CachedRouteOptions | undefined>(HERD_GUARD_ROUTE, context.getClass()),
        this.reflector.get<CachedRouteOptions | undefined>(HERD_GUARD_ROUTE, handler),
        `@CachedRoute(${context.getClass().name}.${handler.name})`,
      );
      if (this.#handlerOf(context).writesResponse) {
        config = {
          ...config,
          policy: { staleWhileRevalidate: false, earlyRefresh: false, ...config.policy },
        };
      }
      this.#routes.set(handler, config);
    }
    return config;
  }

  /**
   * The handler's identity and whether it may be cached (`@SkipCache`, SSE, `@Res()`, streams),
   * read once.
   */
  #handlerOf(context: ExecutionContext): HandlerState {
    const handler = context.getHandler();
    let state = this.#handlers.get(handler);
    if (state === undefined) {
      const described = describeRouteHandler(context.getClass(), handler);
      const skip = this.reflector.getAllAndOverride<boolean | undefined>(HERD_GUARD_SKIP, [
        handler,
        context.getClass(),
      ]);
      state = {
        ...described,
        cacheable: skip !== true && described.unreplayable === undefined,
        varies: new Set(),
        varyList: undefined,
      };
      this.#handlers.set(handler, state);
    }
    return state;
  }

  /**
   * The request headers the key includes (lower case): the route's `vary`, those named by a `Vary`
   * set before the handler ran (`@Header`, CORS or another middleware) and those the handler's
   * responses named before ({@link HandlerState.varies}). `*` among them: nothing may be stored.
   */
  #varyOf(context: ExecutionContext, response: HttpResponse): readonly string[] {
    const route = this.routeConfigOf(context).vary;
    const header = response.header('vary');
    const handler = this.#handlerOf(context);
    // The same for every request of the handler, unless a middleware sets a Vary of its own.
    const last = handler.varyList;
    if (
      last !== undefined &&
      last.route === route &&
      last.header === header &&
      last.varies === handler.varies.size
    ) {
      return last.names;
    }
    const names = new Set(route);
    for (const name of varyNames(header)) names.add(name);
    for (const name of handler.varies) names.add(name);
    handler.varyList = { route, header, varies: handler.varies.size, names: [...names] };
    return handler.varyList.names;
  }

  /** One per request (`switchToHttp()` would make three closures per call). */
  #response(context: ExecutionContext): HttpResponse {
    return this.#request(context).response(
      context.getArgByIndex<unknown>(1),
      this.httpAdapterHost?.httpAdapter,
    );
  }

  #request(context: ExecutionContext): HttpRequest {
    return HttpRequest.of(context.getArgByIndex<unknown>(0), this.httpAdapterHost?.httpAdapter);
  }
}

/**
 * The scope a hook returned, checked where it enters: hooks read the request, typed `any`, so
 * `ctx => req.user` (the user object) or `req.user?.id ?? null` compile. A string is the scope, a
 * number or bigint (a numeric user id) its decimal form, `null` or `undefined` none (the response
 * is
 * shared, and requests with credentials pass through unless the route shares across users);
 * anything
 * else would put every user under one entry, so the request fails with a {@link
 * KeySerializationError}.
 */
function scopeOf(context: ExecutionContext, scope: unknown): string | undefined {
  if (typeof scope === 'string' || scope === undefined) return scope;
  if (scope === null) return undefined;
  if ((typeof scope === 'number' && Number.isFinite(scope)) || typeof scope === 'bigint')
    return String(scope);
  const kind =
    typeof scope === 'object'
      ? 'an object'
      : typeof scope === 'function'
        ? 'a function'
        : String(scope);
  throw new KeySerializationError(
    'scope',
    `is ${kind}`,
    `@CachedRoute(${context.getClass().name}.${context.getHandler().name})`,
    'a scope hook must return the id of the user or tenant (a string), or undefined for a shared response',
  );
}

/**
 * A herd-guard timeout as the HTTP error it is (504, or 503 while another pod loads); other errors
 * unchanged.
 */
function httpErrorFor(error: unknown): unknown {
  if (error instanceof LoaderTimeoutError || error instanceof WaitTimeoutError) {
    return new GatewayTimeoutException('Gateway Timeout', { cause: error });
  }
  if (error instanceof UpstreamUnavailableError) {
    return new ServiceUnavailableException('Service Unavailable', { cause: error });
  }
  return error;
}
