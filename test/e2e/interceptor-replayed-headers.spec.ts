import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { Controller, Get, type INestApplication, Module, Param, Res } from '@nestjs/common';
import { APP_INTERCEPTOR, HttpAdapterHost } from '@nestjs/core';
import request from 'supertest';
import { HerdGuardInterceptor, HerdGuardModule } from '../../lib/index.js';
import { ADAPTERS, startHttpApp } from '../helpers/nest-app.js';
import { Runs } from '../helpers/runs.js';

const DIRECTIVES: Readonly<Record<string, string>> = {
  'max-age-0': 'max-age=0, must-revalidate',
  's-maxage-0': 'public, max-age=60, s-maxage=0',
};

@Controller()
class OrdersController {
  constructor(
    private readonly runs: Runs,
    private readonly adapterHost: HttpAdapterHost,
  ) {}

  /** A page of a list, with the total in a header, as paginated APIs answer. */
  @Get('orders')
  orders(@Res({ passthrough: true }) response: unknown): { items: number[]; run: number } {
    this.adapterHost.httpAdapter.setHeader(response, 'X-Total-Count', '42');
    return { items: [1, 2, 3], run: this.runs.next('orders') };
  }

  /** A handler that says a shared cache must not reuse its response without asking again. */
  @Get('revalidate/:name')
  revalidate(
    @Param('name') name: string,
    @Res({ passthrough: true }) response: unknown,
  ): { run: number } {
    this.adapterHost.httpAdapter.setHeader(response, 'Cache-Control', DIRECTIVES[name]!);
    return { run: this.runs.next(name) };
  }
}

@Module({
  imports: [HerdGuardModule.forRoot({ policy: { soft: '30s', hard: '5m', jitter: 0 } })],
  controllers: [OrdersController],
  providers: [Runs, { provide: APP_INTERCEPTOR, useClass: HerdGuardInterceptor }],
})
class AppModule {}

describe.each(ADAPTERS)(
  "HerdGuardInterceptor replays what the handler's headers say on %s",
  (adapter) => {
    let app: INestApplication;
    const http = () => request(app.getHttpServer());

    beforeEach(async () => {
      app = await startHttpApp(adapter, AppModule);
    });

    afterEach(async () => {
      await app.close();
    });

    it('replays a header the handler set about its body (X-Total-Count) with the cached body', async () => {
      const miss = await http().get('/orders');
      const hit = await http().get('/orders');
      expect(miss.headers['x-total-count']).toBe('42');
      expect(hit.headers['x-cache']).toBe('HIT');
      expect(hit.headers['x-total-count']).toBe('42');
    });

    it.each(Object.entries(DIRECTIVES))(
      'never answers from the cache a response whose handler wrote Cache-Control for no shared reuse (%s: %s)',
      async (name) => {
        const first = await http().get(`/revalidate/${name}`);
        const second = await http().get(`/revalidate/${name}`);
        expect([first.body.run, second.body.run]).toEqual([1, 2]);
        expect(second.headers['x-cache']).not.toBe('HIT');
      },
    );
  },
);
