import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { Controller, Get, type INestApplication, Module, Redirect } from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import request from 'supertest';
import { HerdGuardInterceptor, HerdGuardModule } from '../../lib/index.js';
import { ADAPTERS, startHttpApp } from '../helpers/nest-app.js';
import { Runs } from '../helpers/runs.js';

/** Temporary redirects chosen per run, the way Nest documents dynamic `@Redirect()`. */
@Controller()
class DocsController {
  constructor(private readonly runs: Runs) {}

  @Get('docs/latest')
  @Redirect('https://docs.example.com/v1', 302)
  latest(): { url: string } {
    return { url: `https://docs.example.com/v${this.runs.next('latest')}` };
  }

  @Get('docs/old')
  @Redirect('https://docs.example.com/new', 301)
  moved(): { run: number } {
    return { run: this.runs.next('moved') };
  }

  /** Permanent by default, temporary for this run: the returned status wins, as Nest reads it. */
  @Get('docs/beta')
  @Redirect('https://docs.example.com/stable', 301)
  beta(): { url: string; statusCode: number } {
    return { url: `https://beta-${this.runs.next('beta')}.example.com`, statusCode: 307 };
  }

  @Get('docs/mirror')
  @Redirect('https://mirror-0.example.com', 307)
  mirror(): { url: string } {
    return { url: `https://mirror-${this.runs.next('mirror')}.example.com` };
  }
}

@Module({
  imports: [HerdGuardModule.forRoot({ policy: { soft: '30s', hard: '5m', jitter: 0 } })],
  controllers: [DocsController],
  providers: [Runs, { provide: APP_INTERCEPTOR, useClass: HerdGuardInterceptor }],
})
class AppModule {}

describe.each(ADAPTERS)('HerdGuardInterceptor and @Redirect() on %s', (adapter) => {
  let app: INestApplication;
  const http = () => request(app.getHttpServer());

  beforeEach(async () => {
    app = await startHttpApp(adapter, AppModule);
  });

  afterEach(async () => {
    await app.close();
  });

  it.each([
    ['302', '/docs/latest', 'https://docs.example.com/v2'],
    ['307', '/docs/mirror', 'https://mirror-2.example.com'],
    ['307', '/docs/beta', 'https://beta-2.example.com'],
  ])(
    'never stores a %s redirect (a status outside the cacheable set): the next request is redirected by its own run',
    async (status, path, second) => {
      const first = await http().get(path).redirects(0);
      const next = await http().get(path).redirects(0);
      expect([first.status, next.status]).toEqual([Number(status), Number(status)]);
      expect(next.headers['location']).toBe(second);
      expect(next.headers['x-cache']).toBeUndefined();
      expect(next.headers['cache-control']).toBeUndefined();
    },
  );

  it('stores a permanent (301) redirect and answers the next request with it from the cache', async () => {
    const first = await http().get('/docs/old').redirects(0);
    const next = await http().get('/docs/old').redirects(0);
    expect([first.status, next.status]).toEqual([301, 301]);
    expect(next.headers['location']).toBe('https://docs.example.com/new');
    expect(next.headers['x-cache']).toBe('HIT');
  });
});
