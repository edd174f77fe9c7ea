import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import {
  Controller,
  Get,
  Header,
  Headers,
  type INestApplication,
  Module,
  Res,
} from '@nestjs/common';
import { APP_INTERCEPTOR, HttpAdapterHost } from '@nestjs/core';
import request from 'supertest';
import { CachedRoute, HerdGuardInterceptor, HerdGuardModule } from '../../lib/index.js';
import { ADAPTERS, startHttpApp } from '../helpers/nest-app.js';
import { Runs } from '../helpers/runs.js';

type Request = { headers: Record<string, string | undefined> };

/** Who the request says it is: its credentials, as a handler reading them would answer. */
function caller(authorization?: string, cookie?: string): string {
  return authorization ?? cookie ?? 'anonymous';
}

@Controller()
class AccountController {
  constructor(
    private readonly runs: Runs,
    private readonly adapterHost: HttpAdapterHost,
  ) {}

  @Get('me')
  me(
    @Headers('authorization') authorization?: string,
    @Headers('cookie') cookie?: string,
    @Headers('host') host?: string,
  ): { user: string; host: string | undefined; run: number } {
    return { user: caller(authorization, cookie), host, run: this.runs.next('me') };
  }

  @Get('feed')
  @CachedRoute({
    scope: (context) => context.switchToHttp().getRequest<Request>().headers['authorization'],
  })
  feed(@Headers('authorization') authorization?: string): { user: string; run: number } {
    return { user: caller(authorization), run: this.runs.next('feed') };
  }

  @Get('secret')
  @Header('Cache-Control', 'private, no-store')
  secret(): { run: number } {
    return { run: this.runs.next('secret') };
  }

  @Get('written/:directive')
  written(
    @Res({ passthrough: true }) response: unknown,
    @Headers('x-directive') directive?: string,
  ): { run: number } {
    this.adapterHost.httpAdapter.setHeader(response, 'Cache-Control', directive ?? 'no-store');
    return { run: this.runs.next(`written:${directive}`) };
  }

  @Get('session')
  session(@Res({ passthrough: true }) response: unknown): { run: number } {
    const run = this.runs.next('session');
    this.adapterHost.httpAdapter.setHeader(response, 'Set-Cookie', `session=s${run}; HttpOnly`);
    return { run };
  }
}

/** A route whose response is the same whoever asks, and says so. */
@Controller()
class CatalogController {
  constructor(private readonly runs: Runs) {}

  @Get('catalog')
  @CachedRoute({ shareAcrossUsers: true })
  catalog(): { items: string[]; run: number } {
    return { items: ['a', 'b'], run: this.runs.next('catalog') };
  }
}

/** The README's "cache every GET" setup: the interceptor bound globally. */
@Module({
  imports: [HerdGuardModule.forRoot({ policy: { soft: '30s', hard: '5m', jitter: 0 } })],
  controllers: [AccountController],
  providers: [Runs, { provide: APP_INTERCEPTOR, useClass: HerdGuardInterceptor }],
})
class AppModule {}

@Module({
  imports: [HerdGuardModule.forRoot()],
  controllers: [CatalogController],
  providers: [Runs, { provide: APP_INTERCEPTOR, useClass: HerdGuardInterceptor }],
})
class CatalogModule {}

describe.each(ADAPTERS)('HerdGuardInterceptor keeps private responses private on %s', (adapter) => {
  let app: INestApplication;
  let runs: Runs;
  const http = () => request(app.getHttpServer());

  beforeEach(async () => {
    app = await startHttpApp(adapter, AppModule);
    runs = app.get(Runs);
  });

  afterEach(async () => {
    await app.close();
  });

  it('never answers a request with Authorization from the entry of another user, and marks nothing cacheable', async () => {
    const alice = await http().get('/me').set('Authorization', 'Bearer alice');
    const bob = await http().get('/me').set('Authorization', 'Bearer bob');
    expect([alice.body.user, bob.body.user]).toEqual(['Bearer alice', 'Bearer bob']);
    expect(runs.of('me')).toBe(2);
    expect(bob.headers['x-cache']).toBeUndefined();
    expect(bob.headers['cache-control']).toBeUndefined();
  });

  it('never answers a request with a Cookie from the entry of another user', async () => {
    await http().get('/me').set('Cookie', 'sid=alice');
    const bob = await http().get('/me').set('Cookie', 'sid=bob');
    expect(bob.body.user).toBe('sid=bob');
    expect(bob.headers['x-cache']).toBeUndefined();
    expect(runs.of('me')).toBe(2);
  });

  it('keys anonymous requests by host, so one tenant never gets the body of another', async () => {
    const tenantA = await http().get('/me').set('Host', 'tenant-a.example.com');
    const tenantB = await http().get('/me').set('Host', 'tenant-b.example.com');
    const tenantAAgain = await http().get('/me').set('Host', 'tenant-a.example.com');
    expect([tenantA.body.host, tenantB.body.host]).toEqual([
      'tenant-a.example.com',
      'tenant-b.example.com',
    ]);
    expect([tenantB.headers['x-cache'], tenantAAgain.headers['x-cache']]).toEqual(['MISS', 'HIT']);
    expect(runs.of('me')).toBe(2);
  });

  it('caches a route with a scope per user, with Cache-Control private', async () => {
    const alice = await http().get('/feed').set('Authorization', 'alice');
    const bob = await http().get('/feed').set('Authorization', 'bob');
    const aliceAgain = await http().get('/feed').set('Authorization', 'alice');
    expect([alice.body.user, bob.body.user, aliceAgain.body.user]).toEqual([
      'alice',
      'bob',
      'alice',
    ]);
    expect([bob.headers['x-cache'], aliceAgain.headers['x-cache']]).toEqual(['MISS', 'HIT']);
    expect(aliceAgain.headers['cache-control']).toMatch(/^private, max-age=30/);
    expect(runs.of('feed')).toBe(2);
  });

  it('shares a route that opts in with shareAcrossUsers between requests with credentials', async () => {
    const catalog = await startHttpApp(adapter, CatalogModule);
    try {
      await request(catalog.getHttpServer()).get('/catalog').set('Authorization', 'alice');
      const bob = await request(catalog.getHttpServer()).get('/catalog').set('Cookie', 'sid=bob');
      expect(bob.headers['x-cache']).toBe('HIT');
      expect(bob.body.run).toBe(1);
    } finally {
      await catalog.close();
    }
  });

  it("sends the handler's own Cache-Control: private, no-store as written and never stores the response", async () => {
    const first = await http().get('/secret');
    const second = await http().get('/secret');
    expect([first.body.run, second.body.run]).toEqual([1, 2]);
    expect(second.headers['cache-control']).toBe('private, no-store');
    expect(second.headers['x-cache']).toBeUndefined();
  });

  it.each(['no-store', 'no-cache', 'private, max-age=60'])(
    'does not store a response whose handler wrote Cache-Control: %s, and sends it as written',
    async (directive) => {
      const first = await http().get('/written/x').set('X-Directive', directive);
      const second = await http().get('/written/x').set('X-Directive', directive);
      expect([first.body.run, second.body.run]).toEqual([1, 2]);
      expect(second.headers['cache-control']).toBe(directive);
      expect(second.headers['x-cache']).toBeUndefined();
    },
  );

  it("stores a response whose handler wrote a Cache-Control that allows it, and replays the handler's header", async () => {
    await http().get('/written/x').set('X-Directive', 'public, max-age=5');
    const hit = await http().get('/written/x').set('X-Directive', 'public, max-age=5');
    expect(hit.headers['x-cache']).toBe('HIT');
    expect(hit.headers['cache-control']).toBe('public, max-age=5');
    expect(hit.body.run).toBe(1);
  });

  it('never stores a response that sets a cookie: each request gets its own cookie', async () => {
    const first = await http().get('/session');
    const second = await http().get('/session');
    expect([first.body.run, second.body.run]).toEqual([1, 2]);
    expect(second.headers['set-cookie']).toEqual(['session=s2; HttpOnly']);
    expect(second.headers['x-cache']).toBeUndefined();
  });
});
