import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  Controller,
  Get,
  type INestApplication,
  Injectable,
  Module,
  Param,
  UseInterceptors,
} from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import request from 'supertest';
import {
  Cached,
  CachedRoute,
  ClosedError,
  ConfigurationError,
  HerdGuardHealthIndicator,
  HerdGuardInterceptor,
  HerdGuardModule,
  type HerdGuardModuleOptions,
  HerdGuardService,
  InjectHerdGuard,
  InjectHerdGuardHealth,
  getHerdGuardToken,
  methodCacheKey,
} from '../../lib/index.js';
import { deferred, eventually } from '../helpers/deferred.js';
import { ADAPTERS, startContext, startHttpApp } from '../helpers/nest-app.js';
import { RedisServer, stopAllRedisServers } from '../helpers/redis-server.js';

/*
 * Two caches in one application: the default one on the memory store, `sessions` on Redis (and in
 * some tests `carts` on the same Redis under another namespace). Each has its own store, engine,
 * metrics label, health indicator and shutdown; `@Cached({ cache })` and `@CachedRoute({ cache })`
 * pick one.
 */

let server: RedisServer;
let admin: Redis;

beforeAll(async () => {
  server = await RedisServer.start();
  admin = server.client();
});

afterAll(async () => {
  admin.disconnect();
  await stopAllRedisServers();
});

/** Clients connected to the test's Redis besides the admin connection. */
async function herdGuardClients(): Promise<number> {
  return (await server.clientList()).length - 1;
}

async function allClosed(): Promise<void> {
  await eventually(async () => (await herdGuardClients()) === 0, 2_000, 'Redis connections closed');
}

@Injectable()
class Accounts {
  runs = 0;

  constructor(
    readonly catalog: HerdGuardService,
    @InjectHerdGuard('sessions') readonly sessions: HerdGuardService,
    @InjectHerdGuardHealth() readonly catalogHealth: HerdGuardHealthIndicator,
    @InjectHerdGuardHealth('sessions') readonly sessionsHealth: HerdGuardHealthIndicator,
  ) {}

  @Cached({ cache: 'sessions', soft: '1m' })
  async session(id: string): Promise<string> {
    this.runs += 1;
    return `session ${id}`;
  }

  @Cached()
  async profile(id: string): Promise<string> {
    this.runs += 1;
    return `profile ${id}`;
  }
}

@Controller('tokens')
@UseInterceptors(HerdGuardInterceptor)
class TokensController {
  runs = 0;

  @Get(':id')
  @CachedRoute({ cache: 'sessions' })
  token(@Param('id') id: string): { token: string } {
    this.runs += 1;
    return { token: `t-${id}` };
  }
}

function appModule(namespace: string, registry?: Registry) {
  const metrics = registry === undefined ? false : { registry };
  @Module({
    imports: [
      HerdGuardModule.forRoot({ metrics, logging: false }),
      HerdGuardModule.forRoot({
        name: 'sessions',
        redis: server.url,
        namespace,
        metrics,
        logging: false,
      }),
    ],
    controllers: [TokensController],
    providers: [Accounts],
  })
  class AppModule {}
  return AppModule;
}

describe('two caches in one application: memory and Redis', () => {
  it('keeps their values apart, each in its own store', async () => {
    const app = await startContext(appModule('e2e-named-apart'));
    try {
      const { catalog, sessions } = app.get(Accounts);
      expect(sessions).not.toBe(catalog);
      expect(app.get(getHerdGuardToken('sessions'))).toBe(sessions);
      expect(app.get(getHerdGuardToken())).toBe(catalog);
      expect(app.get(HerdGuardService)).toBe(catalog);

      await catalog.set('user:1', 'from the catalog');
      await sessions.set('user:1', 'from the sessions');
      await expect(catalog.getOrLoad('user:1', async () => 'loaded')).resolves.toBe(
        'from the catalog',
      );
      await expect(sessions.getOrLoad('user:1', async () => 'loaded')).resolves.toBe(
        'from the sessions',
      );
      await sessions.delete('user:1');
      await expect(catalog.peek('user:1')).resolves.toMatchObject({ value: 'from the catalog' });
      expect(catalog.engine.store.name).toBe('memory');
      expect(sessions.engine.store.name).toBe('redis');
      expect(await admin.keys('e2e-named-apart:*')).not.toEqual([]);
    } finally {
      await app.close();
    }
  });

  it('routes @Cached methods to the cache their `cache` option names', async () => {
    const app = await startContext(appModule('e2e-named-cached'));
    try {
      const accounts = app.get(Accounts);
      const { catalog, sessions } = accounts;
      await expect(accounts.session('7')).resolves.toBe('session 7');
      await expect(accounts.session('7')).resolves.toBe('session 7');
      await expect(accounts.profile('7')).resolves.toBe('profile 7');
      await expect(accounts.profile('7')).resolves.toBe('profile 7');
      expect(accounts.runs).toBe(2);

      const sessionKey = methodCacheKey('Accounts.session', ['7']);
      const profileKey = methodCacheKey('Accounts.profile', ['7']);
      await expect(sessions.peek(sessionKey)).resolves.toMatchObject({ value: 'session 7' });
      await expect(catalog.peek(sessionKey)).resolves.toBeUndefined();
      await expect(catalog.peek(profileKey)).resolves.toMatchObject({ value: 'profile 7' });
      await expect(sessions.peek(profileKey)).resolves.toBeUndefined();
      // The method's policy applies in its own cache.
      const entry = await sessions.peek(sessionKey);
      expect((entry?.softExpireAt ?? 0) - (entry?.createdAt ?? 0)).toBeGreaterThanOrEqual(60_000);
    } finally {
      await app.close();
    }
  });

  it.each(ADAPTERS)(
    'caches a @CachedRoute({ cache }) response in that cache (%s)',
    async (adapter) => {
      const app: INestApplication = await startHttpApp(adapter, appModule(`e2e-named-${adapter}`));
      try {
        const first = await request(app.getHttpServer()).get('/tokens/3');
        const second = await request(app.getHttpServer()).get('/tokens/3');
        expect(first.body).toEqual({ token: 't-3' });
        expect(first.headers['x-cache']).toBe('MISS');
        expect(second.headers['x-cache']).toBe('HIT');
        expect(app.get(TokensController).runs).toBe(1);
        const { catalog, sessions } = app.get(Accounts);
        expect(sessions.stats().reads).toMatchObject({ miss: 1, fresh: 1 });
        expect(catalog.stats().reads).toMatchObject({ miss: 0, fresh: 0 });
      } finally {
        await app.close();
      }
    },
  );

  it('reports the health of each cache', async () => {
    const app = await startContext(appModule('e2e-named-health'));
    try {
      const accounts = app.get(Accounts);
      expect(app.get(HerdGuardHealthIndicator)).toBe(accounts.catalogHealth);
      await expect(accounts.catalogHealth.isHealthy('catalog')).resolves.toMatchObject({
        catalog: { status: 'up', store: 'memory' },
      });
      await expect(accounts.sessionsHealth.isHealthy('sessions')).resolves.toMatchObject({
        sessions: { status: 'up', store: 'redis' },
      });
    } finally {
      await app.close();
    }
  });

  it('exports the metrics of both caches into one registry, each with its own cache label', async () => {
    const registry = new Registry();
    const app = await startContext(appModule('e2e-named-metrics', registry));
    try {
      const accounts = app.get(Accounts);
      await accounts.session('1');
      await accounts.session('1');
      await accounts.profile('1');
      const text = await registry.metrics();
      expect(text).toContain('herd_guard_requests_total{cache="sessions",result="miss"} 1');
      expect(text).toContain('herd_guard_requests_total{cache="sessions",result="fresh"} 1');
      expect(text).toContain('herd_guard_requests_total{cache="default",result="miss"} 1');
      expect(text).toContain('herd_guard_requests_total{cache="default",result="fresh"} 0');
      // Gauges read at scrape time report each engine under its own label.
      expect(text).toMatch(/herd_guard_breaker_state\{cache="sessions"\} 0/);
      expect(text).toMatch(/herd_guard_breaker_state\{cache="default"\} 0/);
    } finally {
      await app.close();
    }
  });

  it('closes both stores it opened on shutdown', async () => {
    const module = (() => {
      @Module({
        imports: [
          HerdGuardModule.forRoot({ logging: false }),
          HerdGuardModule.forRoot({
            name: 'sessions',
            redis: server.url,
            namespace: 'e2e-named-close-s',
            logging: false,
          }),
          HerdGuardModule.forRoot({
            name: 'carts',
            redis: { url: server.url, namespace: 'e2e-named-close-c' },
            logging: false,
          }),
        ],
      })
      class AppModule {}
      return AppModule;
    })();
    const app = await startContext(module);
    const caches = [HerdGuardService, getHerdGuardToken('sessions'), getHerdGuardToken('carts')];
    const [catalog, sessions, carts] = caches.map((token) => app.get<HerdGuardService>(token));
    await sessions?.set('k', 'session');
    await carts?.set('k', 'cart');
    // Different namespaces on one Redis: each value under its own prefix.
    expect(await admin.keys('e2e-named-close-s:*')).not.toEqual([]);
    expect(await admin.keys('e2e-named-close-c:*')).not.toEqual([]);
    await expect(carts?.peek('k')).resolves.toMatchObject({ value: 'cart' });
    expect(await herdGuardClients()).toBeGreaterThanOrEqual(2);
    await app.close();
    await allClosed();
    for (const cache of [catalog, sessions, carts]) {
      await expect(cache?.getOrLoad('k', async () => 1)).rejects.toBeInstanceOf(ClosedError);
    }
  });
});

describe('the example of docs/nestjs.md#named-caches', () => {
  it('runs: a global default cache, a global named one from forRootAsync, @Cached and health by name', async () => {
    const REDIS_URL = 'REDIS_URL';
    @Module({ providers: [{ provide: REDIS_URL, useValue: server.url }], exports: [REDIS_URL] })
    class ConfigModule {}
    const sessionsTable = new Map([['s1', { user: 'ada' }]]);
    let queries = 0;

    @Injectable()
    class SessionsService {
      constructor(
        readonly catalog: HerdGuardService,
        @InjectHerdGuard('sessions') private readonly sessions: HerdGuardService,
      ) {}

      @Cached({ cache: 'sessions' })
      async find(id: string): Promise<{ user: string } | null> {
        queries += 1;
        return sessionsTable.get(id) ?? null;
      }

      async logout(id: string): Promise<void> {
        sessionsTable.delete(id);
        await this.sessions.delete(methodCacheKey('SessionsService.find', [id]));
      }
    }

    @Injectable()
    class Health {
      constructor(
        readonly catalog: HerdGuardHealthIndicator,
        @InjectHerdGuardHealth('sessions') readonly sessions: HerdGuardHealthIndicator,
      ) {}
    }

    @Module({ providers: [SessionsService, Health], exports: [SessionsService, Health] })
    class SessionsModule {}

    @Module({
      imports: [
        HerdGuardModule.forRoot({ isGlobal: true, policy: { soft: '30s' }, logging: false }),
        HerdGuardModule.forRootAsync({
          name: 'sessions',
          isGlobal: true,
          imports: [ConfigModule],
          inject: [REDIS_URL],
          useFactory: (url: string) => ({
            redis: url,
            namespace: 'e2e-docs-sessions',
            policy: { soft: '15m', hard: '1h' },
            logging: false,
          }),
        }),
        SessionsModule,
      ],
    })
    class AppModule {}

    const app = await startContext(AppModule);
    try {
      const sessions = app.get(SessionsService);
      await expect(sessions.find('s1')).resolves.toEqual({ user: 'ada' });
      await expect(sessions.find('s1')).resolves.toEqual({ user: 'ada' });
      expect(queries).toBe(1);
      expect(await admin.keys('e2e-docs-sessions:*')).not.toEqual([]);
      await sessions.logout('s1');
      await expect(sessions.find('s1')).resolves.toBeNull();
      expect(queries).toBe(2);
      expect(sessions.catalog.stats().reads.miss).toBe(0);

      const health = app.get(Health);
      await expect(health.catalog.isHealthy('catalog')).resolves.toMatchObject({
        catalog: { status: 'up', store: 'memory' },
      });
      await expect(health.sessions.isHealthy('sessions')).resolves.toMatchObject({
        sessions: { status: 'up', store: 'redis' },
      });
    } finally {
      await app.close();
    }
    await allClosed();
  });
});

describe('a bootstrap that fails with two caches', () => {
  it('closes the Redis connections of the cache opened first when the second one is a duplicate', async () => {
    const sessions = { name: 'sessions', redis: server.url, namespace: 'e2e-dup', logging: false };
    @Module({ imports: [HerdGuardModule.forRoot(sessions), HerdGuardModule.forRoot(sessions)] })
    class AppModule {}
    const error = await Test.createTestingModule({ imports: [AppModule] })
      .compile()
      .then(
        () => undefined,
        (failure: unknown) => failure,
      );
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as ConfigurationError).field).toBe('name');
    expect((error as Error).message).toContain('"sessions"');
    await allClosed();
  });

  it('closes a cache that finishes opening after another one failed the bootstrap', async () => {
    const connectionsBefore = Number((await server.info('stats'))['total_connections_received']);
    const optionsRead = deferred<void>();
    const late = HerdGuardModule.forRootAsync({
      name: 'late',
      useFactory: async (): Promise<HerdGuardModuleOptions> => {
        await optionsRead.promise;
        return { redis: server.url, namespace: 'e2e-late', logging: false };
      },
    });
    const broken = HerdGuardModule.forRoot({ name: 'broken', policy: { soft: '-1s' as '1s' } });
    @Module({ imports: [late, broken] })
    class AppModule {}
    const compiled = Test.createTestingModule({ imports: [AppModule] }).compile();
    await expect(compiled).rejects.toMatchObject({ field: 'policy.soft' });
    // Nest goes on making the other providers: `late` opens its store now, then closes it.
    optionsRead.resolve();
    await eventually(
      async () =>
        Number((await server.info('stats'))['total_connections_received']) > connectionsBefore,
      2_000,
      'the late cache to connect',
    );
    await allClosed();
  });

  it('closes every cache when a @Cached method names a cache the app does not have', async () => {
    @Injectable()
    class Carts {
      @Cached({ cache: 'carts' })
      async find(id: string): Promise<string> {
        return id;
      }
    }
    @Module({
      imports: [
        HerdGuardModule.forRoot({ redis: server.url, namespace: 'e2e-unknown-d', logging: false }),
        HerdGuardModule.forRoot({
          name: 'sessions',
          redis: server.url,
          namespace: 'e2e-unknown-s',
          logging: false,
        }),
      ],
      providers: [Carts],
    })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    moduleRef.useLogger(false);
    expect(await herdGuardClients()).toBeGreaterThanOrEqual(2);
    const error = await moduleRef.init().then(
      () => undefined,
      (failure: unknown) => failure,
    );
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as ConfigurationError).field).toBe('@Cached(Carts.find).cache');
    expect((error as Error).message).toContain('no cache named "carts"');
    expect((error as Error).message).toContain('"default", "sessions"');
    await allClosed();
  });
});
