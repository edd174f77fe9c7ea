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
import { HerdGuardInterceptor, HerdGuardModule } from '../../lib/index.js';
import { ADAPTERS, startHttpApp } from '../helpers/nest-app.js';
import { Runs } from '../helpers/runs.js';

/**
 * Handlers that say, with the standard `Vary` response header, which request headers chose their
 * response (RFC 9110 §12.5.5): a shared cache may reuse such a response only for a request whose
 * listed headers match (RFC 9111 §4.1), and never for `Vary: *`.
 */
@Controller()
class GreetingController {
  constructor(
    private readonly runs: Runs,
    private readonly adapterHost: HttpAdapterHost,
  ) {}

  @Get('greeting')
  @Header('Vary', 'Accept-Language')
  greeting(@Headers('accept-language') language?: string): { text: string; run: number } {
    return {
      text: language?.startsWith('de') === true ? 'Hallo' : 'Hello',
      run: this.runs.next('greeting'),
    };
  }

  @Get('negotiated')
  negotiated(
    @Res({ passthrough: true }) response: unknown,
    @Headers('x-tenant-plan') plan?: string,
  ): { plan: string; run: number } {
    this.adapterHost.httpAdapter.setHeader(response, 'Vary', 'X-Tenant-Plan');
    return { plan: plan ?? 'free', run: this.runs.next('negotiated') };
  }

  @Get('unique')
  unique(@Res({ passthrough: true }) response: unknown): { run: number } {
    this.adapterHost.httpAdapter.setHeader(response, 'Vary', '*');
    return { run: this.runs.next('unique') };
  }
}

/** The README's "cache every GET" setup. */
@Module({
  imports: [HerdGuardModule.forRoot({ policy: { soft: '30s', hard: '5m', jitter: 0 } })],
  controllers: [GreetingController],
  providers: [Runs, { provide: APP_INTERCEPTOR, useClass: HerdGuardInterceptor }],
})
class AppModule {}

describe.each(ADAPTERS)(
  'HerdGuardInterceptor honours the Vary header a handler sends on %s',
  (adapter) => {
    let app: INestApplication;
    const http = () => request(app.getHttpServer());

    beforeEach(async () => {
      app = await startHttpApp(adapter, AppModule);
    });

    afterEach(async () => {
      await app.close();
    });

    it('never answers an English request with the German response of a route declared with @Header("Vary", "Accept-Language")', async () => {
      const german = await http().get('/greeting').set('Accept-Language', 'de-DE');
      const english = await http().get('/greeting').set('Accept-Language', 'en-GB');
      expect(german.body.text).toBe('Hallo');
      expect(english.body.text).toBe('Hello');
    });

    it('never answers a request with another value of a header the handler listed in Vary with the first response', async () => {
      const pro = await http().get('/negotiated').set('X-Tenant-Plan', 'pro');
      const free = await http().get('/negotiated').set('X-Tenant-Plan', 'free');
      expect(pro.body.plan).toBe('pro');
      expect(free.body.plan).toBe('free');
    });

    it('never serves a response sent with Vary: * from the cache', async () => {
      const first = await http().get('/unique');
      const second = await http().get('/unique');
      expect([first.body.run, second.body.run]).toEqual([1, 2]);
      expect(second.headers['x-cache']).not.toBe('HIT');
    });

    it('still answers from the cache a request whose listed headers match, and says which headers it varies by', async () => {
      await http().get('/greeting').set('Accept-Language', 'de-DE');
      const german = await http().get('/greeting').set('Accept-Language', 'de-DE');
      expect(german.headers['x-cache']).toBe('HIT');
      expect(german.body).toEqual({ text: 'Hallo', run: 1 });
      expect(german.headers['vary']).toMatch(/^accept-language$/i);

      // The first run shows the handler varies by X-Tenant-Plan; from then on each plan has its own entry.
      const runs = [];
      for (const plan of ['pro', 'pro', 'pro', 'free', 'pro']) {
        const response = await http().get('/negotiated').set('X-Tenant-Plan', plan);
        expect(response.body.plan).toBe(plan);
        runs.push(response.body.run);
      }
      expect(runs).toEqual([1, 2, 2, 3, 2]);
      const hit = await http().get('/negotiated').set('X-Tenant-Plan', 'free');
      expect(hit.headers['x-cache']).toBe('HIT');
      expect(hit.headers['vary']).toMatch(/^x-tenant-plan$/i);
    });
  },
);
