/**
 * The app S7 serves: the sample catalog app, plus routes with a trivial handler (uncached, a no-op
 * interceptor, herd-guard's interceptor, @nestjs/cache-manager's CacheInterceptor) to measure what
 * an interceptor costs. Used by the S7 server process and by tools/http-hit.ts.
 */
import { CacheInterceptor, CacheModule } from '@nestjs/cache-manager';
import {
  type CallHandler,
  Controller,
  type DynamicModule,
  type ExecutionContext,
  Get,
  Injectable,
  Module,
  type NestInterceptor,
  Param,
  UseInterceptors,
} from '@nestjs/common';
import type { Observable } from 'rxjs';
import { CachedRoute, HerdGuardInterceptor } from '../../lib/index.js';
import { AppModule } from '../../sample/app.module.js';

export interface BenchHttpConfig {
  readonly queryDelayMs: number;
  readonly soft: string;
  readonly hard: string;
}

export { PING_ROUTES, type PingRoute } from './routes.js';

/** An interceptor that does nothing: the cost of Nest's interceptor pipeline itself. */
@Injectable()
class NoopInterceptor implements NestInterceptor {
  intercept(_context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle();
  }
}

@Controller('ping')
class PingController {
  @Get('uncached/:id')
  uncached(@Param('id') id: string): { id: string; ok: boolean } {
    return { id, ok: true };
  }

  @Get('noop-interceptor/:id')
  @UseInterceptors(NoopInterceptor)
  noop(@Param('id') id: string): { id: string; ok: boolean } {
    return { id, ok: true };
  }

  // Fresh for as long as cache-manager's entries live (60 s), so both answer hits in every round
  // (the sample's own routes are fresh for 1 s, for S7b).
  @Get('herd-guard/:id')
  @UseInterceptors(HerdGuardInterceptor)
  @CachedRoute({ soft: '60s', hard: '120s' })
  herdGuard(@Param('id') id: string): { id: string; ok: boolean } {
    return { id, ok: true };
  }

  @Get('cache-manager/:id')
  @UseInterceptors(CacheInterceptor)
  cacheManager(@Param('id') id: string): { id: string; ok: boolean } {
    return { id, ok: true };
  }
}

@Module({})
export class BenchHttpModule {
  static register(config: BenchHttpConfig): DynamicModule {
    return {
      module: BenchHttpModule,
      imports: [
        AppModule.register({
          host: '127.0.0.1',
          port: 0,
          redisUrl: undefined,
          databaseFile: ':memory:',
          queryDelayMs: config.queryDelayMs,
          soft: config.soft as never,
          hard: config.hard as never,
        }),
        // cache-manager 7 over an in-memory Keyv.
        CacheModule.register({ ttl: 60_000 }),
      ],
      controllers: [PingController],
    };
  }
}
