import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import {
  Controller,
  Get,
  Headers,
  Injectable,
  type INestApplication,
  Module,
  NotFoundException,
  Post,
  Query,
  StreamableFile,
  UseInterceptors,
} from '@nestjs/common';
import request from 'supertest';
import {
  CachedRoute,
  HerdGuardInterceptor,
  HerdGuardModule,
  HerdGuardService,
  SkipCache,
} from '../../lib/index.js';
import { deferred, sleep, until } from '../helpers/deferred.js';
import { ADAPTERS, startHttpApp } from '../helpers/nest-app.js';

/** The slow backend behind the routes: counts handler runs per route, per application. */
@Injectable()
class Catalog {
  readonly #runs = new Map<string, number>();
  gate: Promise<void> = Promise.resolve();

  run(route: string): number {
    const runs = (this.#runs.get(route) ?? 0) + 1;
    this.#runs.set(route, runs);
    return runs;
  }

  runs(route: string): number {
    return this.#runs.get(route) ?? 0;
  }
}

type Request = { headers: Record<string, string | undefined> };

@Controller('items')
@UseInterceptors(HerdGuardInterceptor)
@CachedRoute({ tags: ['items'] })
class ItemsController {
  constructor(private readonly catalog: Catalog) {}

  @Get()
  async list(@Query('page') page?: string): Promise<{ page: string; run: number }> {
    const run = this.catalog.run('list');
    await this.catalog.gate;
    return { page: page ?? '1', run };
  }

  @Get('search')
  @CachedRoute({ ignoreQuery: ['_', 'utm_source'] })
  search(@Query() query: Record<string, string>): { query: Record<string, string>; run: number } {
    return { query, run: this.catalog.run('search') };
  }

  @Get('greeting')
  @CachedRoute({ vary: ['Accept-Language'] })
  greeting(@Headers('accept-language') language?: string): { text: string; run: number } {
    return {
      text: language?.startsWith('de') === true ? 'Hallo' : 'Hello',
      run: this.catalog.run('greeting'),
    };
  }

  @Get('me')
  @CachedRoute({
    scope: (context) => context.switchToHttp().getRequest<Request>().headers['x-user'],
  })
  me(@Headers('x-user') user?: string): { user: string | undefined; run: number } {
    return { user, run: this.catalog.run('me') };
  }

  @Get('short')
  @CachedRoute({ soft: '300ms', hard: '1m' })
  short(): { run: number } {
    return { run: this.catalog.run('short') };
  }

  @Get('missing')
  missing(): never {
    this.catalog.run('missing');
    throw new NotFoundException('no such item');
  }

  @Get('flaky')
  flaky(): { run: number } {
    const run = this.catalog.run('flaky');
    if (run === 1) throw new Error('database down');
    return { run };
  }

  @Get('file')
  file(): StreamableFile {
    return new StreamableFile(Buffer.from(`file ${this.catalog.run('file')}`));
  }

  /** Declared as a Promise, so only the value tells it is a stream. */
  @Get('file-later')
  async fileLater(): Promise<StreamableFile> {
    const run = this.catalog.run('file-later');
    await new Promise((resolve) => setTimeout(resolve, 30));
    return new StreamableFile(Buffer.from(`late file ${run}`));
  }

  @Get('live')
  @SkipCache()
  live(): { run: number } {
    return { run: this.catalog.run('live') };
  }

  @Get('zero')
  zero(): number {
    this.catalog.run('zero');
    return 0;
  }

  @Post()
  create(): { run: number } {
    return { run: this.catalog.run('create') };
  }
}

@Module({
  imports: [HerdGuardModule.forRoot({ policy: { soft: '30s', hard: '5m', jitter: 0 } })],
  controllers: [ItemsController],
  providers: [Catalog],
})
class AppModule {}

describe.each(ADAPTERS)('HerdGuardInterceptor on %s', (adapter) => {
  let app: INestApplication;
  let catalog: Catalog;
  let herd: HerdGuardService;
  const http = () => request(app.getHttpServer());

  beforeEach(async () => {
    app = await startHttpApp(adapter, AppModule);
    catalog = app.get(Catalog);
    herd = app.get(HerdGuardService);
  });

  afterEach(async () => {
    await app.close();
  });

  it('runs the handler once for 200 concurrent GETs on a cold route, and all 200 get the same body', async () => {
    const gate = deferred<void>();
    catalog.gate = gate.promise;
    const responses = Promise.all(Array.from({ length: 200 }, () => http().get('/items?page=2')));
    // Every request has reached the cache and joined the one running handler.
    await until(() => herd.stats().coalesced === 199, 10_000, '200 requests to join one load');
    gate.resolve();
    const all = await responses;
    expect(catalog.runs('list')).toBe(1);
    expect(all.every((response) => response.status === 200)).toBe(true);
    expect(new Set(all.map((response) => response.text))).toEqual(
      new Set(['{"page":"2","run":1}']),
    );
    expect(all.every((response) => response.headers['x-cache'] === 'MISS')).toBe(true);
  });

  it('sets X-Cache, Age and Cache-Control from the policy on a MISS, then a HIT', async () => {
    const miss = await http().get('/items');
    expect(miss.headers).toMatchObject({
      'x-cache': 'MISS',
      age: '0',
      'cache-control': 'max-age=30, stale-while-revalidate=270',
    });
    const hit = await http().get('/items');
    expect(hit.headers).toMatchObject({
      'x-cache': 'HIT',
      'cache-control': 'max-age=30, stale-while-revalidate=270',
    });
    expect(Number(hit.headers['age'])).toBeLessThanOrEqual(1);
    expect(hit.body).toEqual(miss.body);
    expect(catalog.runs('list')).toBe(1);
  });

  it('serves STALE with Age past max-age once the soft TTL passes, and refreshes once in the background', async () => {
    const miss = await http().get('/items/short');
    expect(miss.headers).toMatchObject({
      'x-cache': 'MISS',
      'cache-control': 'max-age=0, stale-while-revalidate=59',
    });
    await sleep(350);
    const refreshed = deferred<void>();
    herd.onEvent((event) => {
      if (event.type === 'load-ok' && event.background) refreshed.resolve();
    });
    const stale = await http().get('/items/short');
    expect(stale.headers).toMatchObject({
      'x-cache': 'STALE',
      'cache-control': 'max-age=0, stale-while-revalidate=59',
    });
    expect(stale.body).toEqual({ run: 1 });
    await refreshed.promise;
    const hit = await http().get('/items/short');
    expect(hit.headers['x-cache']).toBe('HIT');
    expect(hit.body).toEqual({ run: 2 });
    expect(catalog.runs('short')).toBe(2);
  });

  it('serves STALE instead of a herd after herd.expireTag() of the route tag, while one refresh runs', async () => {
    await http().get('/items');
    await expect(herd.expireTag('items')).resolves.toBe(1);
    const gate = deferred<void>();
    catalog.gate = gate.promise;
    const refreshed = deferred<void>();
    herd.onEvent((event) => {
      if (event.type === 'load-ok' && event.background) refreshed.resolve();
    });
    const stale = await Promise.all(Array.from({ length: 20 }, () => http().get('/items')));
    expect(stale.every((response) => response.headers['x-cache'] === 'STALE')).toBe(true);
    expect(stale.every((response) => response.body.run === 1)).toBe(true);
    gate.resolve();
    await refreshed.promise;
    const hit = await http().get('/items');
    expect(hit.headers['x-cache']).toBe('HIT');
    expect(hit.body.run).toBe(2);
    expect(catalog.runs('list')).toBe(2);
  });

  it('never caches a POST: the handler runs every time and no X-Cache header is set', async () => {
    const first = await http().post('/items');
    const second = await http().post('/items');
    expect([first.status, second.status]).toEqual([201, 201]);
    expect([first.body.run, second.body.run]).toEqual([1, 2]);
    expect(first.headers['x-cache']).toBeUndefined();
    expect(herd.stats().reads).toMatchObject({ fresh: 0, stale: 0, miss: 0 });
  });

  it('does not cache a handler error: a 404 stays a 404 and the next GET runs the handler again', async () => {
    const first = await http().get('/items/missing');
    const second = await http().get('/items/missing');
    expect([first.status, second.status]).toEqual([404, 404]);
    expect(first.body).toMatchObject({ statusCode: 404, message: 'no such item' });
    expect(first.headers['x-cache']).toBeUndefined();
    expect(catalog.runs('missing')).toBe(2);
  });

  it('does not cache a failure: within the backoff a GET shares the 500, after it the next GET retries and is cached', async () => {
    expect((await http().get('/items/flaky')).status).toBe(500);
    // The backend just failed: the next attempt waits for the backoff (0.5 to 1 s by default).
    expect((await http().get('/items/flaky')).status).toBe(500);
    expect(catalog.runs('flaky')).toBe(1);
    await sleep(1_100);
    const retried = await http().get('/items/flaky');
    expect(retried.status).toBe(200);
    expect(retried.body).toEqual({ run: 2 });
    expect((await http().get('/items/flaky')).headers['x-cache']).toBe('HIT');
    expect(catalog.runs('flaky')).toBe(2);
  });

  it('leaves declared cache busters out of the key and ignores the order of the other parameters', async () => {
    await http().get('/items/search?b=2&a=1&_=111');
    const reordered = await http().get('/items/search?a=1&utm_source=mail&b=2&_=222');
    expect(reordered.headers['x-cache']).toBe('HIT');
    const different = await http().get('/items/search?a=1&b=3');
    expect(different.headers['x-cache']).toBe('MISS');
    expect(catalog.runs('search')).toBe(2);
  });

  it('gives each declared Accept-Language its own entry and sends Vary', async () => {
    const english = await http().get('/items/greeting').set('Accept-Language', 'en');
    const german = await http().get('/items/greeting').set('Accept-Language', 'de');
    const englishAgain = await http().get('/items/greeting').set('Accept-Language', 'en');
    expect([english.body.text, german.body.text, englishAgain.body.text]).toEqual([
      'Hello',
      'Hallo',
      'Hello',
    ]);
    expect([german.headers['x-cache'], englishAgain.headers['x-cache']]).toEqual(['MISS', 'HIT']);
    expect(english.headers['vary']).toMatch(/accept-language/i);
    // Headers not declared do not split the entry.
    const otherHeader = await http()
      .get('/items/greeting')
      .set('Accept-Language', 'en')
      .set('X-Trace', '1');
    expect(otherHeader.headers['x-cache']).toBe('HIT');
    expect(catalog.runs('greeting')).toBe(2);
  });

  it('scopes entries per user and marks them private', async () => {
    const ann = await http().get('/items/me').set('X-User', 'ann');
    const bob = await http().get('/items/me').set('X-User', 'bob');
    const annAgain = await http().get('/items/me').set('X-User', 'ann');
    expect([ann.body.user, bob.body.user, annAgain.body.user]).toEqual(['ann', 'bob', 'ann']);
    expect([bob.headers['x-cache'], annAgain.headers['x-cache']]).toEqual(['MISS', 'HIT']);
    expect(ann.headers['cache-control']).toMatch(/^private, max-age=30/);
    expect(catalog.runs('me')).toBe(2);
  });

  it('never caches a StreamableFile', async () => {
    const first = await http().get('/items/file').buffer(true);
    const second = await http().get('/items/file').buffer(true);
    expect([first.status, second.status]).toEqual([200, 200]);
    expect(Buffer.from(second.body as Buffer).toString()).toBe('file 2');
    expect(first.headers['x-cache']).toBeUndefined();
  });

  it('sends a stream from a Promise-returning handler to concurrent requests, each its own', async () => {
    const responses = await Promise.all(
      Array.from({ length: 5 }, () => http().get('/items/file-later').buffer(true)),
    );
    const bodies = responses.map((response) => Buffer.from(response.body as Buffer).toString());
    expect(responses.every((response) => response.status === 200)).toBe(true);
    expect(bodies.every((body) => /^late file \d$/.test(body))).toBe(true);
    expect(new Set(bodies).size).toBe(5);
    const later = await http().get('/items/file-later').buffer(true);
    expect(later.headers['x-cache']).toBeUndefined();
  });

  it('answers HEAD from the GET entry without running the handler', async () => {
    await http().get('/items?page=3');
    const head = await http().head('/items?page=3');
    expect(head.status).toBe(200);
    expect(head.headers['x-cache']).toBe('HIT');
    expect(catalog.runs('list')).toBe(1);
  });

  it('passes @SkipCache routes through untouched', async () => {
    await http().get('/items/live');
    const second = await http().get('/items/live');
    expect(second.body).toEqual({ run: 2 });
    expect(second.headers['x-cache']).toBeUndefined();
  });

  it('caches a falsy body (0) as a value', async () => {
    const first = await http().get('/items/zero');
    const second = await http().get('/items/zero');
    expect([first.text, second.text]).toEqual(['0', '0']);
    expect(second.headers['x-cache']).toBe('HIT');
    expect(catalog.runs('zero')).toBe(1);
  });

  it('keeps two apps in one process apart: each runs the handler for its own first GET', async () => {
    const other = await startHttpApp(adapter, AppModule);
    try {
      await http().get('/items');
      const otherFirst = await request(other.getHttpServer()).get('/items');
      expect(otherFirst.headers['x-cache']).toBe('MISS');
      expect([catalog.runs('list'), other.get(Catalog).runs('list')]).toEqual([1, 1]);
      expect(other.get(HerdGuardService)).not.toBe(herd);
    } finally {
      await other.close();
    }
  });
});
