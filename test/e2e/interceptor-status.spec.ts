import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import {
  type CallHandler,
  Controller,
  type ExecutionContext,
  Get,
  HttpCode,
  Injectable,
  type INestApplication,
  Module,
  type NestInterceptor,
  NotFoundException,
  Param,
  Res,
  UseInterceptors,
  Version,
  VersioningType,
} from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { type Observable, map, tap } from 'rxjs';
import request from 'supertest';
import {
  CachedRoute,
  HerdGuardInterceptor,
  HerdGuardModule,
  HerdGuardService,
} from '../../lib/index.js';
import { deferred } from '../helpers/deferred.js';
import { ADAPTERS, startHttpApp } from '../helpers/nest-app.js';
import { Runs } from '../helpers/runs.js';

/** Turns a `null` body into a 404, outside the cache (as the sample app does). */
@Injectable()
class NotFoundOnNull implements NestInterceptor {
  intercept(_context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(
      map((body: unknown) => {
        if (body === null || body === undefined) throw new NotFoundException('nothing here');
        return body;
      }),
    );
  }
}

/** Sets 404 on the response for a body that says it found nothing: a status written around the handler. */
@Injectable()
class NotFoundStatus implements NestInterceptor {
  constructor(private readonly adapterHost: HttpAdapterHost) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(
      tap((body: { found?: boolean }) => {
        if (body.found === false)
          this.adapterHost.httpAdapter.status(context.switchToHttp().getResponse(), 404);
      }),
    );
  }
}

@Controller('pages')
@UseInterceptors(HerdGuardInterceptor)
class PagesController {
  constructor(
    private readonly runs: Runs,
    private readonly adapterHost: HttpAdapterHost,
  ) {}

  /** Answers with a status of its own, set on the response (404, 503, 202…) on the first run only. */
  @Get('status/:code')
  status(
    @Param('code') code: string,
    @Res({ passthrough: true }) response: unknown,
  ): { code: string; run: number } {
    const run = this.runs.next(`status:${code}`);
    if (run === 1) this.adapterHost.httpAdapter.status(response, Number(code));
    return { code, run };
  }

  /** Not found on its first run (a status it sets itself), found from then on. */
  @Get('appears')
  @CachedRoute({ tags: ['appears'] })
  appears(@Res({ passthrough: true }) response: unknown): { found: boolean } {
    const found = this.runs.next('appears') > 1;
    if (!found) this.adapterHost.httpAdapter.status(response, 404);
    return { found };
  }

  /** The same, with the status set by an interceptor inside the cache: refreshed in the background. */
  @Get('emerges')
  @UseInterceptors(NotFoundStatus)
  @CachedRoute({ tags: ['emerges'] })
  emerges(): { found: boolean } {
    return { found: this.runs.next('emerges') > 1 };
  }

  @Get('gone')
  @HttpCode(410)
  gone(): { gone: true; run: number } {
    return { gone: true, run: this.runs.next('gone') };
  }

  @Get('empty')
  @HttpCode(204)
  empty(): void {
    this.runs.next('empty');
  }
}

/** The interceptor bound on the route only, inside the one that answers 404 for `null`. */
@Controller('lookup')
class LookupController {
  constructor(private readonly runs: Runs) {}

  @Get(':id')
  @UseInterceptors(NotFoundOnNull, HerdGuardInterceptor)
  @CachedRoute({ negativeTtl: '1m' })
  find(@Param('id') id: string): { id: string } | null {
    this.runs.next('lookup');
    return id === '1' ? { id } : null;
  }
}

@Controller('items')
@UseInterceptors(HerdGuardInterceptor)
class ItemsV1Controller {
  constructor(private readonly runs: Runs) {}

  @Get()
  @Version('1')
  list(): { version: number; run: number } {
    return { version: 1, run: this.runs.next('v1') };
  }
}

@Controller('items')
@UseInterceptors(HerdGuardInterceptor)
class ItemsV2Controller {
  constructor(private readonly runs: Runs) {}

  @Get()
  @Version('2')
  list(): { version: number; run: number } {
    return { version: 2, run: this.runs.next('v2') };
  }
}

@Controller({ path: 'home', host: 'a.example.com' })
@UseInterceptors(HerdGuardInterceptor)
class SiteAController {
  @Get()
  home(): { site: string } {
    return { site: 'a' };
  }
}

@Controller({ path: 'home', host: 'b.example.com' })
@UseInterceptors(HerdGuardInterceptor)
class SiteBController {
  @Get()
  home(): { site: string } {
    return { site: 'b' };
  }
}

@Module({
  imports: [HerdGuardModule.forRoot({ policy: { soft: '30s', hard: '5m', jitter: 0 } })],
  controllers: [PagesController, LookupController, ItemsV1Controller, ItemsV2Controller],
  providers: [Runs, NotFoundOnNull, NotFoundStatus],
})
class AppModule {}

/** Host routing is Express-only in Nest (Fastify has no nested routers). */
@Module({
  imports: [HerdGuardModule.forRoot()],
  controllers: [SiteAController, SiteBController],
})
class SitesModule {}

describe.each(ADAPTERS)(
  'HerdGuardInterceptor replays statuses and tells handlers apart on %s',
  (adapter) => {
    let app: INestApplication;
    let runs: Runs;
    let herd: HerdGuardService;
    const http = () => request(app.getHttpServer());

    beforeEach(async () => {
      app = await startHttpApp(adapter, AppModule, (created) =>
        created.enableVersioning({ type: VersioningType.HEADER, header: 'X-API-Version' }),
      );
      runs = app.get(Runs);
      herd = app.get(HerdGuardService);
    });

    afterEach(async () => {
      await app.close();
    });

    it('replays a 404 set on the response as a 404, with its body', async () => {
      const miss = await http().get('/pages/status/404');
      const hit = await http().get('/pages/status/404');
      expect([miss.status, hit.status]).toEqual([404, 404]);
      expect(hit.headers['x-cache']).toBe('HIT');
      expect(hit.body).toEqual({ code: '404', run: 1 });
    });

    it('refreshes an entry whose status the handler set once expired, with the status the handler sets now', async () => {
      expect((await http().get('/pages/appears')).status).toBe(404);
      await herd.expireTag('appears');
      const refreshed = await http().get('/pages/appears');
      expect(refreshed.status).toBe(200);
      expect(refreshed.body).toEqual({ found: true });
      const hit = await http().get('/pages/appears');
      expect([hit.status, hit.headers['x-cache']]).toEqual([200, 'HIT']);
      expect(runs.of('appears')).toBe(2);
    });

    it('refreshes a stale 404 in the background with the status of the new run, not the one replayed', async () => {
      expect((await http().get('/pages/emerges')).status).toBe(404);
      await herd.expireTag('emerges');
      const refreshed = deferred<void>();
      herd.onEvent((event) => {
        if (event.type === 'load-ok' && event.background) refreshed.resolve();
      });
      const stale = await http().get('/pages/emerges');
      expect([stale.status, stale.headers['x-cache']]).toEqual([404, 'STALE']);
      await refreshed.promise;
      const hit = await http().get('/pages/emerges');
      expect([hit.status, hit.headers['x-cache'], hit.body]).toEqual([200, 'HIT', { found: true }]);
    });

    it('replays a 410 set with @HttpCode as a 410', async () => {
      await http().get('/pages/gone');
      const hit = await http().get('/pages/gone');
      expect(hit.status).toBe(410);
      expect(hit.headers['x-cache']).toBe('HIT');
      expect(runs.of('gone')).toBe(1);
    });

    it('replays a 204 with no body as a 204', async () => {
      await http().get('/pages/empty');
      const hit = await http().get('/pages/empty');
      expect(hit.status).toBe(204);
      expect(hit.headers['x-cache']).toBe('HIT');
      expect(runs.of('empty')).toBe(1);
    });

    it.each([503, 500, 202, 302])(
      'never stores a %s set on the response: the next request runs the handler',
      async (code) => {
        const first = await http().get(`/pages/status/${code}`).redirects(0);
        expect(first.status).toBe(code);
        expect(first.headers['x-cache']).toBeUndefined();
        const second = await http().get(`/pages/status/${code}`);
        expect(second.status).toBe(200);
        expect(second.body.run).toBe(2);
        const third = await http().get(`/pages/status/${code}`);
        expect(third.headers['x-cache']).toBe('HIT');
        expect(runs.of(`status:${code}`)).toBe(2);
      },
    );

    it('keeps caching a null body as "not found" for negativeTtl, answered 404 by the interceptor outside', async () => {
      const first = await http().get('/lookup/2');
      const second = await http().get('/lookup/2');
      expect([first.status, second.status]).toEqual([404, 404]);
      expect(runs.of('lookup')).toBe(1);
      expect(herd.stats().reads.negative).toBe(1);
    });

    it('gives the v2 handler its own entry when header versioning routes one URL to two handlers', async () => {
      const v1 = await http().get('/items').set('X-API-Version', '1');
      const v2 = await http().get('/items').set('X-API-Version', '2');
      const v2Again = await http().get('/items').set('X-API-Version', '2');
      expect([v1.body.version, v2.body.version, v2Again.body.version]).toEqual([1, 2, 2]);
      expect([v2.headers['x-cache'], v2Again.headers['x-cache']]).toEqual(['MISS', 'HIT']);
      expect([runs.of('v1'), runs.of('v2')]).toEqual([1, 1]);
    });
  },
);

describe('HerdGuardInterceptor with host routing on express', () => {
  it('gives each host-routed controller its own entry for one path', async () => {
    const app = await startHttpApp('express', SitesModule);
    try {
      const a = await request(app.getHttpServer()).get('/home').set('Host', 'a.example.com');
      const b = await request(app.getHttpServer()).get('/home').set('Host', 'b.example.com');
      expect([a.body.site, b.body.site]).toEqual(['a', 'b']);
      expect(b.headers['x-cache']).toBe('MISS');
    } finally {
      await app.close();
    }
  });
});
