/**
 * The HTTP side of S7, started in its own process (so autocannon and the app do not share a
 * CPU): the sample catalog app, plus routes with a trivial handler (uncached, a no-op interceptor,
 * herd-guard's interceptor, @nestjs/cache-manager's CacheInterceptor) to measure what an
 * interceptor costs.
 * Tells its parent the port over IPC.
 */
import 'reflect-metadata';
import { CacheInterceptor, CacheModule } from '@nestjs/cache-manager';
import {
  type CallHandler,
  Controller,
  type ExecutionContext,
  Get,
  Injectable,
  Module,
  type NestInterceptor,
  Param,
  UseInterceptors,
} from '@nestjs/common';
import type { Observable } from 'rxjs';
import { NestFactory } from '@nestjs/core';
import { HerdGuardInterceptor } from '../../lib/index.js';
import { AppModule } from '../../sample/app.module.js';

const config = JSON.parse(process.argv[2] ?? '{}') as {
  queryDelayMs: number;
  soft: string;
  hard: string;
};

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

  @Get('herd-guard/:id')
  @UseInterceptors(HerdGuardInterceptor)
  herdGuard(@Param('id') id: string): { id: string; ok: boolean } {
    return { id, ok: true };
  }

  @Get('cache-manager/:id')
  @UseInterceptors(CacheInterceptor)
  cacheManager(@Param('id') id: string): { id: string; ok: boolean } {
    return { id, ok: true };
  }
}

@Module({
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
    CacheModule.register({ ttl: 60_000 }),
  ],
  controllers: [PingController],
})
class BenchHttpModule {}

const app = await NestFactory.create(BenchHttpModule, { logger: false });
await app.listen(0, '127.0.0.1');
const { port } = app.getHttpServer().address() as { port: number };
process.send?.({ port });
process.on('message', (message: unknown) => {
  if (message === 'stop') void app.close().then(() => process.exit(0));
});
