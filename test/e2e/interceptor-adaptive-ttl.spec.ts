import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { Controller, Get, Header, type INestApplication, Module, Param, Res } from '@nestjs/common';
import { APP_INTERCEPTOR, HttpAdapterHost } from '@nestjs/core';
import request from 'supertest';
import {
  type CachedResponse,
  CachedRoute,
  HerdGuardInterceptor,
  HerdGuardModule,
  HerdGuardService,
} from '../../lib/index.js';
import { sleep } from '../helpers/deferred.js';
import { ADAPTERS, startHttpApp } from '../helpers/nest-app.js';
import { Runs } from '../helpers/runs.js';

/** Cache-Control values the handlers answer with, by name. */
const CACHE_CONTROL: Readonly<Record<string, string>> = {
  'max-age-120': 'public, max-age=120',
  'max-age-1': 'public, max-age=1',
  shared: 'public, max-age=3600, s-maxage=60, stale-while-revalidate=30',
  'no-store': 'no-store, max-age=60',
  private: 'private, max-age=60',
};

/** Expires (and Cache-Control) headers the handlers answer with, by name, made per response. */
const EXPIRES: Readonly<Record<string, () => Record<string, string>>> = {
  zero: () => ({ Expires: '0' }),
  past: () => ({ Expires: new Date(Date.now() - 60_000).toUTCString() }),
  'past-max-age': () => ({
    Expires: new Date(Date.now() - 60_000).toUTCString(),
    'Cache-Control': 'public, max-age=60',
  }),
  future: () => ({ Expires: new Date(Date.now() + 120_000).toUTCString() }),
  'future-max-age': () => ({
    Expires: new Date(Date.now() + 120_000).toUTCString(),
    'Cache-Control': 'public, max-age=30',
  }),
};

/** The upstream's current ETag for the feed: unchanged unless a test changes it. */
const upstream = { etag: '"v1"', version: 1 };

@Controller()
class PricesController {
  /** The ETag of the stale response each run of the feed's handler was given, in order. */
  readonly seenEtags: Array<string | undefined> = [];

  constructor(
    private readonly runs: Runs,
    private readonly adapterHost: HttpAdapterHost,
    private readonly herd: HerdGuardService,
  ) {}

  @Get('prices/:name')
  @CachedRoute({ ttlFromCacheControl: true })
  prices(
    @Param('name') name: string,
    @Res({ passthrough: true }) response: unknown,
  ): { run: number } {
    this.adapterHost.httpAdapter.setHeader(response, 'Cache-Control', CACHE_CONTROL[name]!);
    return { run: this.runs.next(name) };
  }

  /** A Cache-Control written with @Header (no @Res): refreshed in the background as usual. */
  @Get('static')
  @CachedRoute({ ttlFromCacheControl: true })
  @Header('Cache-Control', 'public, max-age=90')
  static(): { run: number } {
    return { run: this.runs.next('static') };
  }

  /** Fresh for one second, never to be served stale by a cache. */
  @Get('revalidate/must')
  @CachedRoute({ ttlFromCacheControl: true })
  @Header('Cache-Control', 'public, max-age=1, must-revalidate')
  mustRevalidate(): { run: number } {
    return { run: this.runs.next('revalidate/must') };
  }

  /** The same for shared caches only. */
  @Get('revalidate/proxy')
  @CachedRoute({ ttlFromCacheControl: true })
  @Header('Cache-Control', 'public, max-age=1, proxy-revalidate')
  proxyRevalidate(): { run: number } {
    return { run: this.runs.next('revalidate/proxy') };
  }

  /** s-maxage carries proxy-revalidate for a shared cache. */
  @Get('revalidate/shared')
  @CachedRoute({ ttlFromCacheControl: true })
  @Header('Cache-Control', 'public, s-maxage=1')
  sharedMaxAge(): { run: number } {
    return { run: this.runs.next('revalidate/shared') };
  }

  /** must-revalidate forbids the stale window stale-while-revalidate would grant. */
  @Get('revalidate/over-swr')
  @CachedRoute({ ttlFromCacheControl: true })
  @Header('Cache-Control', 'public, max-age=1, must-revalidate, stale-while-revalidate=30')
  overSwr(): { run: number } {
    return { run: this.runs.next('revalidate/over-swr') };
  }

  /** The same answer, on a route that keeps its own policy. */
  @Get('fixed')
  fixed(@Res({ passthrough: true }) response: unknown): { run: number } {
    this.adapterHost.httpAdapter.setHeader(response, 'Cache-Control', CACHE_CONTROL['max-age-1']!);
    return { run: this.runs.next('fixed') };
  }

  /** An Expires on a route that keeps its own policy. */
  @Get('expires/:name')
  expires(
    @Param('name') name: string,
    @Res({ passthrough: true }) response: unknown,
  ): { run: number } {
    for (const [header, value] of Object.entries(EXPIRES[name]!()))
      this.adapterHost.httpAdapter.setHeader(response, header, value);
    return { run: this.runs.next(`expires/${name}`) };
  }

  /** An Expires on a route that takes its TTL from the response. */
  @Get('expires-ttl/:name')
  @CachedRoute({ ttlFromCacheControl: true })
  expiresTtl(
    @Param('name') name: string,
    @Res({ passthrough: true }) response: unknown,
  ): { run: number } {
    for (const [header, value] of Object.entries(EXPIRES[name]!()))
      this.adapterHost.httpAdapter.setHeader(response, header, value);
    return { run: this.runs.next(`expires-ttl/${name}`) };
  }

  /** A proxy of an upstream feed that asks the upstream with If-None-Match on refresh. */
  @Get('feed')
  @CachedRoute({ soft: '300ms' })
  feed(@Res({ passthrough: true }) response: unknown): unknown {
    const load = this.herd.currentLoad<CachedResponse>();
    const etag = load?.stale?.headers?.['etag'];
    this.seenEtags.push(etag);
    this.runs.next('feed');
    // 304 from the upstream: keep the stored response, fresh again.
    if (etag !== undefined && etag === upstream.etag) return load!.unchanged();
    this.adapterHost.httpAdapter.setHeader(response, 'ETag', upstream.etag);
    return { version: upstream.version };
  }
}

@Module({
  imports: [HerdGuardModule.forRoot({ policy: { soft: '1h', hard: '2h', jitter: 0 } })],
  controllers: [PricesController],
  providers: [Runs, { provide: APP_INTERCEPTOR, useClass: HerdGuardInterceptor }],
})
class AppModule {}

describe.each(ADAPTERS)('a route whose handler sets its own TTL, on %s', (adapter) => {
  let app: INestApplication;
  let loadedKeys: string[];
  const http = () => request(app.getHttpServer());
  const entryOf = async (index: number) => app.get(HerdGuardService).peek(loadedKeys[index]!);

  beforeEach(async () => {
    upstream.etag = '"v1"';
    upstream.version = 1;
    app = await startHttpApp(adapter, AppModule);
    loadedKeys = [];
    app.get(HerdGuardService).onEvent((event) => {
      if (event.type === 'load-ok') loadedKeys.push(event.key);
    });
  });

  afterEach(async () => {
    await app.close();
  });

  it("stores the response for its handler's max-age (ttlFromCacheControl), and replays that header", async () => {
    const miss = await http().get('/prices/max-age-120');
    const hit = await http().get('/prices/max-age-120');
    expect(miss.headers['x-cache']).toBe('MISS');
    expect(hit.headers['x-cache']).toBe('HIT');
    expect(hit.body).toEqual({ run: 1 });
    expect(hit.headers['cache-control']).toBe('public, max-age=120');
    const entry = await entryOf(0);
    expect(entry!.softExpireAt - entry!.createdAt).toBe(120_000);
    expect(entry!.hardExpireAt - entry!.createdAt).toBe(7_200_000);
  });

  it('takes the TTL from a Cache-Control written with @Header', async () => {
    await http().get('/static');
    const hit = await http().get('/static');
    expect(hit.headers['x-cache']).toBe('HIT');
    expect(hit.headers['cache-control']).toBe('public, max-age=90');
    const entry = await entryOf(0);
    expect(entry!.softExpireAt - entry!.createdAt).toBe(90_000);
  });

  it.each(['no-store', 'private'])(
    'still passes through a response whose Cache-Control forbids storing (%s)',
    async (name) => {
      const first = await http().get(`/prices/${name}`);
      const second = await http().get(`/prices/${name}`);
      expect([first.body.run, second.body.run]).toEqual([1, 2]);
      expect(second.headers['x-cache']).toBeUndefined();
    },
  );

  it('takes s-maxage over max-age, and stale-while-revalidate as the stale window', async () => {
    await http().get('/prices/shared');
    const entry = await entryOf(0);
    expect(entry!.softExpireAt - entry!.createdAt).toBe(60_000);
    expect(entry!.hardExpireAt - entry!.createdAt).toBe(90_000);
  });

  it("runs the handler again once its own max-age passed, while a route without the option keeps the route's TTL", async () => {
    await http().get('/prices/max-age-1');
    await http().get('/fixed');
    await sleep(1_100);
    const adaptive = await http().get('/prices/max-age-1');
    const fixed = await http().get('/fixed');
    expect(adaptive.body).toEqual({ run: 2 });
    expect(adaptive.headers['x-cache']).not.toBe('HIT');
    expect(fixed.body).toEqual({ run: 1 });
    expect(fixed.headers['x-cache']).toBe('HIT');
  });

  it('gives the handler the stale response and its ETag on refresh, and keeps it fresh when the upstream says unchanged', async () => {
    const first = await http().get('/feed');
    expect(first.body).toEqual({ version: 1 });
    await sleep(350);
    const refreshed = await http().get('/feed');
    expect(refreshed.status).toBe(200);
    expect(refreshed.body).toEqual({ version: 1 });
    expect(refreshed.headers['etag']).toBe('"v1"');
    const controller = app.get(PricesController);
    expect(controller.seenEtags).toEqual([undefined, '"v1"']);
    const hit = await http().get('/feed');
    expect(hit.headers['x-cache']).toBe('HIT');
    expect(hit.body).toEqual({ version: 1 });
    // The upstream changed: the next refresh stores its new answer.
    upstream.etag = '"v2"';
    upstream.version = 2;
    await sleep(350);
    const changed = await http().get('/feed');
    expect(changed.body).toEqual({ version: 2 });
    expect(changed.headers['etag']).toBe('"v2"');
    expect(controller.seenEtags).toEqual([undefined, '"v1"', '"v1"']);
  });

  it.each(['/expires/zero', '/expires/past', '/expires-ttl/zero', '/expires-ttl/past'])(
    'passes through a response whose Expires is in the past or invalid (%s), without adding a max-age',
    async (path) => {
      const first = await http().get(path);
      const second = await http().get(path);
      expect([first.body.run, second.body.run]).toEqual([1, 2]);
      expect(second.headers['x-cache']).toBeUndefined();
      expect(second.headers['cache-control']).toBeUndefined();
    },
  );

  it('stores a response whose past Expires a max-age overrides (RFC 9111 §5.3)', async () => {
    await http().get('/expires/past-max-age');
    const hit = await http().get('/expires/past-max-age');
    expect(hit.headers['x-cache']).toBe('HIT');
    expect(hit.body).toEqual({ run: 1 });
  });

  it('takes the soft TTL from an Expires in the future when the response has no max-age (ttlFromCacheControl)', async () => {
    await http().get('/expires-ttl/future');
    const hit = await http().get('/expires-ttl/future');
    expect(hit.headers['x-cache']).toBe('HIT');
    const entry = await entryOf(0);
    // Expires has whole seconds: the lifetime is up to a second short of 120 s.
    expect(entry!.softExpireAt - entry!.createdAt).toBeGreaterThan(118_000);
    expect(entry!.softExpireAt - entry!.createdAt).toBeLessThanOrEqual(120_000);
  });

  it('takes max-age over Expires (ttlFromCacheControl)', async () => {
    await http().get('/expires-ttl/future-max-age');
    const entry = await entryOf(0);
    expect(entry!.softExpireAt - entry!.createdAt).toBe(30_000);
  });

  it.each(['must', 'proxy', 'shared', 'over-swr'])(
    'keeps no stale window for a response that must be revalidated once stale (%s): hard TTL = soft TTL',
    async (name) => {
      await http().get(`/revalidate/${name}`);
      const entry = await entryOf(0);
      expect(entry!.softExpireAt - entry!.createdAt).toBe(1_000);
      expect(entry!.hardExpireAt - entry!.createdAt).toBe(1_000);
    },
  );

  it('never serves a max-age=1, must-revalidate response once its second has passed', async () => {
    await http().get('/revalidate/must');
    await sleep(2_100);
    const later = await http().get('/revalidate/must');
    expect(later.headers['x-cache']).toBe('MISS');
    expect(later.body).toEqual({ run: 2 });
  });
});
