import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { Controller, Get, type INestApplication, Module, Req, Res } from '@nestjs/common';
import { APP_INTERCEPTOR, HttpAdapterHost } from '@nestjs/core';
import { ExpressAdapter, type NestExpressApplication } from '@nestjs/platform-express';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { HerdGuardInterceptor, HerdGuardModule } from '../../lib/index.js';
import { ADAPTERS, type AdapterName, startHttpApp } from '../helpers/nest-app.js';

/** What a handler reads of the request it answers: the platform's view, proxy headers included. */
type PlatformRequest = { hostname: string; protocol: string };

@Controller()
class SiteController {
  constructor(private readonly adapterHost: HttpAdapterHost) {}

  /** A page for the site asked for, by the host name the platform reports (X-Forwarded-Host behind a proxy). */
  @Get('home')
  home(@Req() incoming: PlatformRequest): { site: string } {
    return { site: incoming.hostname };
  }

  /** A page whose links carry the scheme it was asked over (X-Forwarded-Proto behind a proxy). */
  @Get('links')
  links(@Req() incoming: PlatformRequest): { self: string } {
    return { self: `${incoming.protocol}://${incoming.hostname}/links` };
  }

  /** Moves plain-HTTP visitors to HTTPS for good (a cacheable 301), and answers those over HTTPS. */
  @Get('account')
  account(
    @Req() incoming: PlatformRequest,
    @Res({ passthrough: true }) response: unknown,
  ): { secure: true } | undefined {
    if (incoming.protocol === 'https') return { secure: true };
    this.adapterHost.httpAdapter.status(response, 301);
    this.adapterHost.httpAdapter.setHeader(
      response,
      'Location',
      `https://${incoming.hostname}/account`,
    );
    return undefined;
  }
}

@Module({
  imports: [HerdGuardModule.forRoot({ policy: { soft: '30s', hard: '5m', jitter: 0 } })],
  controllers: [SiteController],
  providers: [{ provide: APP_INTERCEPTOR, useClass: HerdGuardInterceptor }],
})
class AppModule {}

/** The app behind a proxy it trusts: the host name comes from X-Forwarded-Host, Host is the proxy's upstream. */
async function startBehindProxy(adapter: AdapterName): Promise<INestApplication> {
  const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
  if (adapter === 'express') {
    const app = moduleRef.createNestApplication<NestExpressApplication>(new ExpressAdapter(), {
      logger: false,
    });
    app.set('trust proxy', true);
    await app.listen(0, '127.0.0.1');
    return app;
  }
  const app = moduleRef.createNestApplication<NestFastifyApplication>(
    new FastifyAdapter({ trustProxy: true }),
    {
      logger: false,
    },
  );
  await app.init();
  await app.getHttpAdapter().getInstance().ready();
  await app.listen(0, '127.0.0.1');
  return app;
}

describe.each(ADAPTERS)('HerdGuardInterceptor keys behind a trusted proxy on %s', (adapter) => {
  let app: INestApplication;
  const http = () => request(app.getHttpServer());

  beforeEach(async () => {
    app = await startBehindProxy(adapter);
  });

  afterEach(async () => {
    await app.close();
  });

  it('never answers one forwarded host with the page built for another that came through the same upstream Host', async () => {
    const a = await http()
      .get('/home')
      .set('Host', 'app.internal:3000')
      .set('X-Forwarded-Host', 'a.example.com');
    const b = await http()
      .get('/home')
      .set('Host', 'app.internal:3000')
      .set('X-Forwarded-Host', 'b.example.com');
    const again = await http()
      .get('/home')
      .set('Host', 'app.internal:3000')
      .set('X-Forwarded-Host', 'a.example.com');
    expect([a.body.site, b.body.site, again.body.site]).toEqual([
      'a.example.com',
      'b.example.com',
      'a.example.com',
    ]);
    expect(again.headers['x-cache']).toBe('HIT');
  });
});

describe.each(ADAPTERS)('HerdGuardInterceptor keys by scheme on %s', (adapter) => {
  let app: INestApplication;
  const http = () => request(app.getHttpServer());

  afterEach(async () => {
    await app.close();
  });

  it('never answers an HTTPS request with the page built for plain HTTP behind a trusted proxy', async () => {
    app = await startBehindProxy(adapter);
    const over = (proto: string) =>
      http().get('/links').set('Host', 'shop.example.com').set('X-Forwarded-Proto', proto);
    const plain = await over('http');
    const secure = await over('https');
    const again = await over('https');
    expect([plain.body.self, secure.body.self, again.body.self]).toEqual([
      'http://shop.example.com/links',
      'https://shop.example.com/links',
      'https://shop.example.com/links',
    ]);
    expect(again.headers['x-cache']).toBe('HIT');
  });

  it('never answers an HTTPS request with the redirect to HTTPS cached for plain HTTP (no redirect loop)', async () => {
    app = await startBehindProxy(adapter);
    const over = (proto: string) =>
      http().get('/account').set('Host', 'shop.example.com').set('X-Forwarded-Proto', proto);
    const moved = await over('http');
    const cachedMove = await over('http');
    const secure = await over('https');
    expect([moved.status, cachedMove.status, secure.status]).toEqual([301, 301, 200]);
    expect(cachedMove.headers['x-cache']).toBe('HIT');
    expect(moved.headers['location']).toBe('https://shop.example.com/account');
    expect(secure.body).toEqual({ secure: true });
  });

  it('shares one entry between requests whatever X-Forwarded-Proto a client sends when no proxy is trusted', async () => {
    app = await startHttpApp(adapter, AppModule);
    const first = await http().get('/links').set('X-Forwarded-Proto', 'https');
    const second = await http().get('/links').set('X-Forwarded-Proto', 'gopher');
    expect(first.body.self).toMatch(/^http:\/\//);
    expect(second.body).toEqual(first.body);
    expect(second.headers['x-cache']).toBe('HIT');
  });
});
