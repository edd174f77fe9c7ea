import { afterEach, describe, expect, it } from '@jest/globals';
import { Controller, Get, type INestApplication, Module, Req } from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { ExpressAdapter, type NestExpressApplication } from '@nestjs/platform-express';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { HerdGuardInterceptor, HerdGuardModule } from '../../lib/index.js';
import { ADAPTERS, startHttpApp } from '../helpers/nest-app.js';

let runs = 0;
@Controller()
class C {
  @Get('page')
  page(@Req() req: { protocol: string; headers: Record<string, string> }) {
    runs++;
    return { link: `${req.protocol}://x/`, key: req.headers['x-api-key'] ?? null, run: runs };
  }
}
@Module({
  imports: [HerdGuardModule.forRoot({ credentialHeaders: ['X-API-KEY'] })],
  controllers: [C],
  providers: [{ provide: APP_INTERCEPTOR, useClass: HerdGuardInterceptor }],
})
class AppModule {}

afterEach(() => {
  runs = 0;
});

describe('Fastify app following the Fastify docs: decorateRequest("user", "")', () => {
  let app: NestFastifyApplication;
  afterEach(async () => {
    await app.close();
  });
  it('anonymous requests are still cached', async () => {
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    app = moduleRef.createNestApplication<NestFastifyApplication>(new FastifyAdapter(), {
      logger: false,
    });
    app.getHttpAdapter().getInstance().decorateRequest('user', '');
    await app.init();
    await app.getHttpAdapter().getInstance().ready();
    await app.listen(0, '127.0.0.1');
    await request(app.getHttpServer()).get('/page');
    const b = await request(app.getHttpServer()).get('/page');
    expect(b.headers['x-cache']).toBe('HIT');
  });
});

describe.each(ADAPTERS)('credential header tricks on %s', (adapter) => {
  let app: INestApplication;
  afterEach(async () => {
    await app.close();
  });
  it('uppercase option, lower/mixed-case and duplicated request headers are private', async () => {
    app = await startHttpApp(adapter, AppModule);
    const s = app.getHttpServer();
    await request(s).get('/page').set('x-api-key', 'ann');
    const bob = await request(s).get('/page').set('X-Api-Key', 'bob');
    expect(bob.body.key).toBe('bob');
    expect(bob.headers['x-cache']).toBeUndefined();
    await request(s).get('/page').set('x-api-key', '');
    const empty2 = await request(s).get('/page').set('x-api-key', '');
    expect(empty2.body.key === '' || empty2.body.key === null).toBe(true);
  });
});

async function expressProxied(trust: unknown): Promise<INestApplication> {
  const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
  const app = moduleRef.createNestApplication<NestExpressApplication>(new ExpressAdapter(), {
    logger: false,
  });
  app.set('trust proxy', trust);
  await app.listen(0, '127.0.0.1');
  return app;
}
async function fastifyProxied(trust: unknown): Promise<INestApplication> {
  const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
  const app = moduleRef.createNestApplication<NestFastifyApplication>(
    new FastifyAdapter({ trustProxy: trust as never }),
    { logger: false },
  );
  await app.init();
  await app.getHttpAdapter().getInstance().ready();
  await app.listen(0, '127.0.0.1');
  return app;
}

describe.each([
  ['express', true],
  ['express', 1],
  ['express', 'loopback'],
  ['express', (_a: string, i: number) => i === 0],
  ['fastify', true],
  ['fastify', 1],
  ['fastify', '127.0.0.1'],
] as const)('X-Forwarded-Proto on %s trust=%p', (adapter, trust) => {
  let app: INestApplication;
  afterEach(async () => {
    await app.close();
  });
  it('never serves a link built for one scheme to a request over another', async () => {
    app = adapter === 'express' ? await expressProxied(trust) : await fastifyProxied(trust);
    const s = app.getHttpServer();
    const values = [
      'http',
      'https,http',
      'http,https',
      'HTTPS',
      ' https ',
      'https, http',
      'https',
      'HTTP',
      'http , https',
      '',
    ];
    const seen: string[] = [];
    for (const v of values) {
      for (let i = 0; i < 2; i++) {
        const r = await request(s).get('/page').set('x-forwarded-proto', v);
        const own = await (async () => {
          const u = await request(s)
            .get('/page?fresh=' + Math.random())
            .set('x-forwarded-proto', v);
          return u.body.link;
        })();
        seen.push(`${JSON.stringify(v)}:${r.headers['x-cache']}:${r.body.link}/${own}`);
        expect(String(r.body.link).toLowerCase()).toBe(String(own).toLowerCase());
      }
    }
  });
});
