import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import {
  Controller,
  type ExecutionContext,
  Get,
  Headers,
  Injectable,
  type INestApplication,
  Module,
  UseInterceptors,
} from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import request from 'supertest';
import {
  HerdGuardInterceptor,
  HerdGuardModule,
  type HerdGuardModuleOptions,
} from '../../lib/index.js';
import { ADAPTERS, startHttpApp } from '../helpers/nest-app.js';

/** A ConfigService look-alike: values read from the environment by name. */
@Injectable()
class ConfigService {
  constructor(private readonly values: Readonly<Record<string, string>>) {}

  get(name: string): string {
    const value = this.values[name];
    if (value === undefined) throw new Error(`missing config ${name}`);
    return value;
  }
}

@Module({
  providers: [
    {
      provide: ConfigService,
      useFactory: () => new ConfigService({ CACHE_SOFT: '45s', CACHE_HARD: '90s' }),
    },
  ],
  exports: [ConfigService],
})
class ConfigModule {}

/** Scopes every cached route by tenant, through the protected hook. */
@Injectable()
class TenantCacheInterceptor extends HerdGuardInterceptor {
  protected override scopeKey(context: ExecutionContext): string | undefined {
    return context.switchToHttp().getRequest<{ headers: Record<string, string | undefined> }>()
      .headers['x-tenant'];
  }
}

@Injectable()
class Counter {
  runs = 0;
}

@Controller('report')
class ReportController {
  constructor(private readonly counter: Counter) {}

  @Get()
  report(@Headers('x-tenant') tenant?: string): { tenant: string | undefined; run: number } {
    this.counter.runs += 1;
    return { tenant, run: this.counter.runs };
  }

  /** Bound here and globally: cached once, not twice. */
  @Get('twice')
  @UseInterceptors(HerdGuardInterceptor)
  twice(): { run: number } {
    this.counter.runs += 1;
    return { run: this.counter.runs };
  }
}

@Module({
  imports: [
    HerdGuardModule.forRootAsync({
      isGlobal: true,
      imports: [ConfigModule],
      inject: [ConfigService],
      useFactory: (config: ConfigService): HerdGuardModuleOptions => ({
        policy: {
          soft: config.get('CACHE_SOFT') as '45s',
          hard: config.get('CACHE_HARD') as '90s',
          jitter: 0,
        },
      }),
    }),
  ],
  controllers: [ReportController],
  providers: [Counter, { provide: APP_INTERCEPTOR, useClass: TenantCacheInterceptor }],
})
class AppModule {}

describe.each(ADAPTERS)('HerdGuardModule.forRootAsync on %s', (adapter) => {
  let app: INestApplication;
  const http = () => request(app.getHttpServer());

  beforeEach(async () => {
    app = await startHttpApp(adapter, AppModule);
  });

  afterEach(async () => {
    await app.close();
  });

  it('takes the policy from a ConfigService-style factory for routes cached by APP_INTERCEPTOR', async () => {
    const miss = await http().get('/report').set('X-Tenant', 'acme');
    const hit = await http().get('/report').set('X-Tenant', 'acme');
    expect(miss.headers['cache-control']).toBe('private, max-age=45, stale-while-revalidate=45');
    expect([miss.headers['x-cache'], hit.headers['x-cache']]).toEqual(['MISS', 'HIT']);
    expect(app.get(Counter).runs).toBe(1);
  });

  it('keeps tenants apart through an overridden scopeKey hook', async () => {
    const acme = await http().get('/report').set('X-Tenant', 'acme');
    const globex = await http().get('/report').set('X-Tenant', 'globex');
    expect([acme.body, globex.body]).toEqual([
      { tenant: 'acme', run: 1 },
      { tenant: 'globex', run: 2 },
    ]);
    expect(globex.headers['x-cache']).toBe('MISS');
  });

  it('caches a route bound both globally and on the route once', async () => {
    const first = await http().get('/report/twice');
    const second = await http().get('/report/twice');
    expect([first.headers['x-cache'], second.headers['x-cache']]).toEqual(['MISS', 'HIT']);
    expect(second.body).toEqual({ run: 1 });
    expect(app.get(Counter).runs).toBe(1);
  });
});
