import { afterEach, describe, expect, it } from '@jest/globals';
import { Controller, Get, type INestApplication, Module, Res } from '@nestjs/common';
import { APP_INTERCEPTOR, HttpAdapterHost } from '@nestjs/core';
import request from 'supertest';
import { CachedRoute, HerdGuardInterceptor, HerdGuardModule } from '../../lib/index.js';
import { sleep } from '../helpers/deferred.js';
import { ADAPTERS, startHttpApp } from '../helpers/nest-app.js';

let runs = 0;
@Controller()
class C {
  constructor(private readonly host: HttpAdapterHost) {}
  /** A BFF relaying an upstream's headers: Date 1h ago, Expires 50 min ago (Expires - Date = +10 min). */
  @Get('relayed')
  @CachedRoute({ ttlFromCacheControl: true })
  relayed(@Res({ passthrough: true }) res: unknown) {
    runs++;
    this.host.httpAdapter.setHeader(res, 'Date', new Date(Date.now() - 3_600_000).toUTCString());
    this.host.httpAdapter.setHeader(res, 'Expires', new Date(Date.now() - 3_000_000).toUTCString());
    return { run: runs };
  }
  /** must-revalidate on a route without ttlFromCacheControl but with a stale window. */
  @Get('mr')
  @CachedRoute({ soft: '1s', hard: '30s' })
  mr(@Res({ passthrough: true }) res: unknown) {
    runs++;
    this.host.httpAdapter.setHeader(res, 'Cache-Control', 'public, max-age=1, must-revalidate');
    return { run: runs };
  }
}
@Module({
  imports: [HerdGuardModule.forRoot()],
  controllers: [C],
  providers: [{ provide: APP_INTERCEPTOR, useClass: HerdGuardInterceptor }],
})
class AppModule {}

describe.each(ADAPTERS)('Expires on %s', (adapter) => {
  let app: INestApplication;
  afterEach(async () => {
    await app.close();
    runs = 0;
  });
  it('does not store a relayed response whose Expires is already past', async () => {
    app = await startHttpApp(adapter, AppModule);
    await request(app.getHttpServer()).get('/relayed');
    const b = await request(app.getHttpServer()).get('/relayed');
    expect(b.headers['x-cache']).toBeUndefined();
    expect(runs).toBe(2);
  });
  it('never serves a must-revalidate response stale on a route without ttlFromCacheControl', async () => {
    app = await startHttpApp(adapter, AppModule);
    await request(app.getHttpServer()).get('/mr');
    await sleep(1_300);
    const b = await request(app.getHttpServer()).get('/mr');
    expect(b.headers['x-cache']).not.toBe('STALE');
  });
});
