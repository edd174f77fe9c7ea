import { afterEach, describe, expect, it } from '@jest/globals';
import {
  Controller,
  Get,
  type INestApplicationContext,
  type LoggerService,
  Injectable,
  Module,
  type Type,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Test } from '@nestjs/testing';
import { Registry } from 'prom-client';
import {
  Cached,
  CachedRoute,
  ConfigurationError,
  DEFAULT_CACHE_NAME,
  HerdGuardHealthIndicator,
  HerdGuardModule,
  type HerdGuardModuleOptions,
  HerdGuardService,
  InjectHerdGuard,
  getHerdGuardHealthToken,
  getHerdGuardToken,
  methodCacheKey,
} from '../../../lib/index.js';
import { startContext } from '../../helpers/nest-app.js';

/** Boots an application context for `module` and returns the error that stopped it. */
async function bootstrapError(module: Type): Promise<ConfigurationError> {
  try {
    const app = await NestFactory.createApplicationContext(module, {
      logger: false,
      abortOnError: false,
    });
    await app.close();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigurationError);
    return error as ConfigurationError;
  }
  throw new Error('expected the bootstrap to fail');
}

/** What a forRoot() call throws, synchronously. */
function forRootError(call: () => unknown): ConfigurationError {
  try {
    call();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigurationError);
    return error as ConfigurationError;
  }
  throw new Error('expected forRoot() to throw');
}

let app: INestApplicationContext | undefined;

afterEach(async () => {
  await app?.close();
  app = undefined;
});

const quiet = { logging: false } as const;

describe('named caches: tokens', () => {
  it('uses the classes themselves as the tokens of the default cache', () => {
    expect(getHerdGuardToken()).toBe(HerdGuardService);
    expect(getHerdGuardToken(DEFAULT_CACHE_NAME)).toBe(HerdGuardService);
    expect(getHerdGuardHealthToken()).toBe(HerdGuardHealthIndicator);
    expect(getHerdGuardToken('sessions')).toBe('HerdGuardService(sessions)');
    expect(getHerdGuardHealthToken('sessions')).toBe('HerdGuardHealthIndicator(sessions)');
  });

  it('gets a named cache by its token, and the default one by the class, whatever the order of import', async () => {
    @Module({
      imports: [
        HerdGuardModule.forRoot({ name: 'sessions', policy: { soft: '5m' }, ...quiet }),
        HerdGuardModule.forRoot({ policy: { soft: '1m' }, ...quiet }),
        HerdGuardModule.forRoot({ name: 'carts', policy: { soft: '2m' }, ...quiet }),
      ],
    })
    class AppModule {}
    app = await startContext(AppModule);
    expect(app.get(HerdGuardService).engine.defaults.softMs).toBe(60_000);
    expect(app.get<HerdGuardService>(getHerdGuardToken('sessions')).engine.defaults.softMs).toBe(
      300_000,
    );
    expect(app.get<HerdGuardService>(getHerdGuardToken('carts')).engine.defaults.softMs).toBe(
      120_000,
    );
    const health = app.get<HerdGuardHealthIndicator>(getHerdGuardHealthToken('carts'));
    expect(health).toBeInstanceOf(HerdGuardHealthIndicator);
    expect(health).not.toBe(app.get(HerdGuardHealthIndicator));
  });

  it("takes name: 'default' as the default cache", async () => {
    app = await startContext(HerdGuardModule.forRoot({ name: 'default', ...quiet }));
    expect(app.get(HerdGuardService)).toBeInstanceOf(HerdGuardService);
  });
});

describe('named caches: modules', () => {
  it('injects a named cache of a global module into a feature module that does not import it', async () => {
    @Injectable()
    class Sessions {
      constructor(@InjectHerdGuard('sessions') readonly cache: HerdGuardService) {}
    }
    @Module({ providers: [Sessions], exports: [Sessions] })
    class FeatureModule {}
    @Module({
      imports: [
        HerdGuardModule.forRoot({ name: 'sessions', isGlobal: true, ...quiet }),
        FeatureModule,
      ],
    })
    class AppModule {}
    app = await startContext(AppModule);
    expect(app.get(Sessions).cache).toBe(app.get(getHerdGuardToken('sessions')));
  });

  it('reads the options of a named cache from forRootAsync, the name beside the factory', async () => {
    const SETTINGS = 'SETTINGS';
    @Module({
      providers: [{ provide: SETTINGS, useValue: { soft: '7s' } }],
      exports: [SETTINGS],
    })
    class ConfigModule {}
    @Injectable()
    class Sessions {
      constructor(
        @InjectHerdGuard('sessions') readonly sessions: HerdGuardService,
        readonly catalog: HerdGuardService,
      ) {}
    }
    @Module({
      imports: [
        HerdGuardModule.forRoot(quiet),
        HerdGuardModule.forRootAsync({
          name: 'sessions',
          imports: [ConfigModule],
          inject: [SETTINGS],
          useFactory: (settings: { soft: '7s' }): HerdGuardModuleOptions => ({
            policy: settings,
            ...quiet,
          }),
        }),
      ],
      providers: [Sessions],
    })
    class AppModule {}
    app = await startContext(AppModule);
    const { sessions, catalog } = app.get(Sessions);
    expect(sessions.engine.defaults.softMs).toBe(7_000);
    expect(catalog.engine.defaults.softMs).toBe(30_000);
  });

  it('fails the bootstrap when the factory of forRootAsync returns the name', async () => {
    @Module({
      imports: [
        HerdGuardModule.forRootAsync({
          useFactory: () => ({ name: 'sessions' }) as HerdGuardModuleOptions,
        }),
      ],
    })
    class AppModule {}
    const error = await bootstrapError(AppModule);
    expect(error.field).toBe('name');
    expect(error.message).toContain('forRootAsync({ name, useFactory })');
  });

  it.each([
    ['an empty name', ''],
    ['a name with a space', 'my sessions'],
    ['a name with a brace', 'a{b}'],
    ['a name longer than 64 characters', 'x'.repeat(65)],
    ['a name that is not a string', 42],
  ])('refuses %s at forRoot() and forRootAsync()', (_, name) => {
    expect(forRootError(() => HerdGuardModule.forRoot({ name: name as string })).field).toBe(
      'name',
    );
    expect(
      forRootError(() =>
        HerdGuardModule.forRootAsync({ name: name as string, useFactory: () => ({}) }),
      ).field,
    ).toBe('name');
  });

  it('accepts a name made of letters, digits and . _ : -', async () => {
    const name = 'Shop-2_eu:sessions.v1';
    app = await startContext(HerdGuardModule.forRoot({ name, ...quiet }));
    expect(app.get(getHerdGuardToken(name))).toBeInstanceOf(HerdGuardService);
  });

  it('fails the bootstrap on two default caches', async () => {
    @Module({ imports: [HerdGuardModule.forRoot(quiet), HerdGuardModule.forRoot(quiet)] })
    class AppModule {}
    const error = await bootstrapError(AppModule);
    expect(error.field).toBe('name');
    expect(error.message).toContain('twice without a name');
  });

  it("fails the bootstrap on name: 'default' beside an unnamed cache", async () => {
    @Module({
      imports: [HerdGuardModule.forRoot(quiet), HerdGuardModule.forRoot({ name: 'default' })],
    })
    class AppModule {}
    await expect(bootstrapError(AppModule)).resolves.toMatchObject({ field: 'name' });
  });

  it('fails the bootstrap on two caches of one name, even from forRoot and forRootAsync', async () => {
    @Module({
      imports: [
        HerdGuardModule.forRoot({ name: 'sessions', ...quiet }),
        HerdGuardModule.forRootAsync({ name: 'sessions', useFactory: () => quiet }),
      ],
    })
    class AppModule {}
    const error = await bootstrapError(AppModule);
    expect(error.field).toBe('name');
    expect(error.message).toContain('twice with the name "sessions"');
  });

  it('labels the metrics of a named cache with its name, not its namespace', async () => {
    const registry = new Registry();
    app = await startContext(
      HerdGuardModule.forRoot({
        name: 'sessions',
        namespace: 'shop',
        metrics: { registry },
        ...quiet,
      }),
    );
    await app.get<HerdGuardService>(getHerdGuardToken('sessions')).getOrLoad('k', async () => 1);
    expect(await registry.metrics()).toContain(
      'herd_guard_requests_total{cache="sessions",result="miss"} 1',
    );
  });

  it('logs a named cache under the context HerdGuard:<name>', async () => {
    const contexts: unknown[] = [];
    const recorder: LoggerService = {
      log: () => undefined,
      error: () => undefined,
      warn: () => undefined,
      debug: (_message: unknown, context?: unknown) => contexts.push(context),
    };
    @Module({
      imports: [HerdGuardModule.forRoot(), HerdGuardModule.forRoot({ name: 'sessions' })],
    })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    moduleRef.useLogger(recorder);
    app = await moduleRef.init();
    await app.get<HerdGuardService>(getHerdGuardToken('sessions')).getOrLoad('k', async () => 1);
    await app.get(HerdGuardService).getOrLoad('k', async () => 1);
    expect(contexts).toContain('HerdGuard:sessions');
    expect(contexts).toContain('HerdGuard');
  });

  it('fails the bootstrap when a cache takes the label another cache has in one registry', async () => {
    const registry = new Registry();
    @Module({
      imports: [
        HerdGuardModule.forRoot({ namespace: 'sessions', metrics: { registry }, ...quiet }),
        HerdGuardModule.forRoot({ name: 'sessions', metrics: { registry }, ...quiet }),
      ],
    })
    class AppModule {}
    const error = await bootstrapError(AppModule);
    expect(error.field).toBe('metrics.cacheName');
    expect(error.message).toContain('"sessions" is already used by another cache');
  });
});

describe('named caches: @Cached and @CachedRoute', () => {
  it('fails the bootstrap on a @Cached cache the app does not have, naming the known ones', async () => {
    @Injectable()
    class Repo {
      @Cached({ cache: 'sesions' })
      async find(): Promise<number> {
        return 1;
      }
    }
    @Module({
      imports: [HerdGuardModule.forRoot(quiet), HerdGuardModule.forRoot({ name: 'sessions' })],
      providers: [Repo],
    })
    class AppModule {}
    const error = await bootstrapError(AppModule);
    expect(error.field).toBe('@Cached(Repo.find).cache');
    expect(error.message).toContain('no cache named "sesions"');
    expect(error.message).toContain('"default", "sessions"');
  });

  it('fails the bootstrap on a @Cached method without a cache in an app with only named caches', async () => {
    @Injectable()
    class Repo {
      @Cached()
      async find(): Promise<number> {
        return 1;
      }
    }
    @Module({
      imports: [HerdGuardModule.forRoot({ name: 'sessions', ...quiet })],
      providers: [Repo],
    })
    class AppModule {}
    const error = await bootstrapError(AppModule);
    expect(error.field).toBe('@Cached(Repo.find).cache');
    expect(error.message).toContain('no default cache');
  });

  it('fails the bootstrap on a cache option that is not a name', async () => {
    @Injectable()
    class Repo {
      @Cached({ cache: 42 as unknown as string })
      async find(): Promise<number> {
        return 1;
      }
    }
    @Module({ imports: [HerdGuardModule.forRoot(quiet)], providers: [Repo] })
    class AppModule {}
    await expect(bootstrapError(AppModule)).resolves.toMatchObject({
      field: '@Cached(Repo.find).cache',
    });
  });

  it('fails the bootstrap on a @CachedRoute cache the app does not have', async () => {
    @Controller('items')
    @CachedRoute({ cache: 'carts' })
    class ItemsController {
      @Get()
      list(): number[] {
        return [];
      }
    }
    @Module({
      imports: [HerdGuardModule.forRoot(quiet), HerdGuardModule.forRoot({ name: 'sessions' })],
      controllers: [ItemsController],
    })
    class AppModule {}
    const error = await bootstrapError(AppModule);
    expect(error.field).toBe('@CachedRoute(ItemsController.list).cache');
    expect(error.message).toContain('"default", "sessions"');
  });

  it("checks a method's policy against the default policy of its own cache", async () => {
    @Injectable()
    class Repo {
      // 2m: below the sessions cache's soft TTL, above the default cache's.
      @Cached({ cache: 'sessions', hard: '2m' })
      async session(): Promise<number> {
        return 1;
      }
    }
    @Module({
      imports: [
        HerdGuardModule.forRoot(quiet),
        HerdGuardModule.forRoot({ name: 'sessions', policy: { soft: '5m' }, ...quiet }),
      ],
      providers: [Repo],
    })
    class AppModule {}
    const error = await bootstrapError(AppModule);
    expect(error.field).toBe('@Cached(Repo.session).hard');
    expect(error.message).toContain('must be >= soft (300000 ms)');
  });

  it('checks default key prefixes per cache: one prefix may be used once in each cache', async () => {
    // Two classes of one name, in two modules: their default keys are both `UsersService.find(…)`.
    const users = (cache: string | undefined) => {
      @Injectable()
      class UsersService {
        @Cached({ cache })
        async find(id: string): Promise<string> {
          return `${cache ?? 'default'} ${id}`;
        }
      }
      return UsersService;
    };
    const inDefault = users(undefined);
    const inSessions = users('sessions');
    @Module({ providers: [inDefault] })
    class Billing {}
    @Module({ providers: [inSessions] })
    class Auth {}
    @Module({
      imports: [
        HerdGuardModule.forRoot(quiet),
        HerdGuardModule.forRoot({ name: 'sessions', ...quiet }),
        Billing,
        Auth,
      ],
    })
    class AppModule {}
    app = await startContext(AppModule);
    const key = methodCacheKey('UsersService.find', ['1']);
    await expect(app.get(inDefault).find('1')).resolves.toBe('default 1');
    await expect(app.get(inSessions).find('1')).resolves.toBe('sessions 1');
    await expect(app.get(HerdGuardService).peek(key)).resolves.toMatchObject({
      value: 'default 1',
    });
    await expect(
      app.get<HerdGuardService>(getHerdGuardToken('sessions')).peek(key),
    ).resolves.toMatchObject({ value: 'sessions 1' });
    await app.close();
    app = undefined;

    const otherInSessions = users('sessions');
    @Module({ providers: [otherInSessions] })
    class Shop {}
    @Module({
      imports: [HerdGuardModule.forRoot({ name: 'sessions', ...quiet }), Auth, Shop],
    })
    class ClashModule {}
    const error = await bootstrapError(ClashModule);
    expect(error.field).toBe('@Cached(UsersService.find)');
    expect(error.message).toContain('would share the cache keys UsersService.find');
  });

  it('lets a provider inject the service of a cache by token in a factory', async () => {
    @Module({
      imports: [HerdGuardModule.forRoot({ name: 'sessions', ...quiet })],
      providers: [
        {
          provide: 'SESSION_STORE_NAME',
          inject: [getHerdGuardToken('sessions')],
          useFactory: (cache: HerdGuardService) => cache.engine.store.name,
        },
      ],
    })
    class AppModule {}
    app = await startContext(AppModule);
    expect(app.get('SESSION_STORE_NAME')).toBe('memory');
  });
});
