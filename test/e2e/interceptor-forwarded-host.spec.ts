import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { Controller, Get, type INestApplication, Module, Req } from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { ExpressAdapter, type NestExpressApplication } from '@nestjs/platform-express';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { HerdGuardInterceptor, HerdGuardModule } from '../../lib/index.js';
import { ADAPTERS, type AdapterName } from '../helpers/nest-app.js';

@Controller()
class SiteController {
  /** A page for the site asked for, by the host name the platform reports (X-Forwarded-Host behind a proxy). */
  @Get('home')
  home(@Req() incoming: { hostname: string }): { site: string } {
    return { site: incoming.hostname };
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
