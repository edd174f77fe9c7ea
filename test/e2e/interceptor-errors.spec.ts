import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import {
  type CallHandler,
  Controller,
  type ExecutionContext,
  Get,
  Injectable,
  type INestApplication,
  type LoggerService,
  Module,
  type NestInterceptor,
  NotFoundException,
  Param,
  ParseIntPipe,
  UseInterceptors,
} from '@nestjs/common';
import { Registry } from 'prom-client';
import { type Observable, map } from 'rxjs';
import request from 'supertest';
import {
  Cached,
  CachedRoute,
  HerdGuardInterceptor,
  HerdGuardModule,
  SkipCache,
} from '../../lib/index.js';
import { ADAPTERS, startHttpApp } from '../helpers/nest-app.js';
import { parsePrometheusText, sampleValue } from '../helpers/prometheus-text.js';

/** Keeps what herd-guard logs, by level. */
class RecordingLogger implements LoggerService {
  readonly lines: Array<{ level: string; message: unknown }> = [];
  log(message: unknown): void {
    this.lines.push({ level: 'log', message });
  }
  warn(message: unknown): void {
    this.lines.push({ level: 'warn', message });
  }
  error(message: unknown): void {
    this.lines.push({ level: 'error', message });
  }
  debug(message: unknown): void {
    this.lines.push({ level: 'debug', message });
  }
  at(level: string): unknown[] {
    return this.lines.filter((line) => line.level === level).map((line) => line.message);
  }
}

const logger = new RecordingLogger();
const registry = new Registry();

@Injectable()
class ProductsService {
  runs = 0;

  /** The README's service: a missing product is a NotFoundException. */
  @Cached({ key: (id: number) => `product:${id}` })
  async findOne(id: number): Promise<{ id: number }> {
    this.runs += 1;
    if (id > 100) throw new NotFoundException(`No product ${id}`);
    return { id };
  }

  /** Never answers: only the loader timeout ends it. */
  @Cached({ key: () => 'stuck', loaderHardTimeout: '50ms' })
  async stuck(): Promise<string> {
    return new Promise<string>(() => undefined);
  }
}

@Injectable()
class NotFoundOnNull implements NestInterceptor {
  intercept(_context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(
      map((body: unknown) => {
        if (body === null) throw new NotFoundException();
        return body;
      }),
    );
  }
}

@Controller('products')
@UseInterceptors(HerdGuardInterceptor)
class ProductsController {
  constructor(private readonly products: ProductsService) {}

  @Get(':id')
  findOne(@Param('id', ParseIntPipe) id: number): Promise<{ id: number }> {
    return this.products.findOne(id);
  }

  @Get('slow/:id')
  @CachedRoute({ loaderHardTimeout: '50ms' })
  slow(@Param('id') _id: string): Promise<never> {
    return new Promise<never>(() => undefined);
  }
}

/** A route cached by the interceptor inside one that answers 404 for `null` (as the sample app does). */
@Controller('lookup')
class LookupController {
  @Get(':id')
  @UseInterceptors(NotFoundOnNull, HerdGuardInterceptor)
  find(@Param('id', ParseIntPipe) _id: number): null {
    return null;
  }
}

/** A route that calls a @Cached method directly, without the interceptor. */
@Controller('plain')
class PlainController {
  constructor(private readonly products: ProductsService) {}

  @Get('stuck')
  stuck(): Promise<string> {
    return this.products.stuck();
  }
}

@Controller('ops')
@UseInterceptors(HerdGuardInterceptor)
@SkipCache()
class OpsController {
  runs = 0;

  @Get('live')
  live(): { run: number } {
    return { run: ++this.runs };
  }

  @Get('report')
  @SkipCache(false)
  report(): { run: number } {
    return { run: ++this.runs };
  }
}

@Module({
  imports: [
    HerdGuardModule.forRoot({ logging: logger, metrics: { registry }, policy: { jitter: 0 } }),
  ],
  controllers: [ProductsController, LookupController, PlainController, OpsController],
  providers: [ProductsService, NotFoundOnNull],
})
class AppModule {}

describe.each(ADAPTERS)('errors read right on %s', (adapter) => {
  let app: INestApplication;
  const http = () => request(app.getHttpServer());
  const loaderErrors = async (): Promise<number> =>
    sampleValue(parsePrometheusText(await registry.metrics()), 'herd_guard_loader_errors_total', {
      trigger: 'miss',
    });

  beforeEach(async () => {
    logger.lines.length = 0;
    registry.clear();
    app = await startHttpApp(adapter, AppModule);
  });

  afterEach(async () => {
    await app.close();
  });

  it('answers a ParseIntPipe 400 without logging a loader failure or counting a loader error', async () => {
    const response = await http().get('/products/abc');
    expect(response.status).toBe(400);
    expect(logger.at('warn')).toEqual([]);
    expect(await loaderErrors()).toBe(0);
  });

  it('answers a NotFoundException from a @Cached method with a 404 and logs nothing at WARN', async () => {
    const first = await http().get('/products/404');
    const second = await http().get('/products/404');
    expect([first.status, second.status]).toEqual([404, 404]);
    expect(first.body).toMatchObject({ message: 'No product 404' });
    expect(logger.at('warn')).toEqual([]);
    expect(await loaderErrors()).toBe(0);
  });

  it('logs nothing at WARN for a negative-cache hit', async () => {
    await http().get('/lookup/1').expect(404);
    await http().get('/lookup/1').expect(404);
    expect(logger.at('warn')).toEqual([]);
  });

  it('answers 504 when the route handler passes its loader timeout', async () => {
    const response = await http().get('/products/slow/1');
    expect(response.status).toBe(504);
    expect(await loaderErrors()).toBe(1);
  });

  it('answers 504 when a @Cached method passes its loader timeout, also without the interceptor', async () => {
    const response = await http().get('/plain/stuck');
    expect(response.status).toBe(504);
    expect(JSON.stringify(response.body)).not.toContain('stuck');
  });

  it('caches a handler marked @SkipCache(false) under a @SkipCache() controller, and only that one', async () => {
    await http().get('/ops/report');
    const report = await http().get('/ops/report');
    expect(report.headers['x-cache']).toBe('HIT');
    const live = await http().get('/ops/live');
    expect(live.headers['x-cache']).toBeUndefined();
  });
});
