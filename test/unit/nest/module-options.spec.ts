import { describe, expect, it } from '@jest/globals';
import { Controller, Get, Injectable, Module, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import {
  Cached,
  CachedRoute,
  ConfigurationError,
  type HerdGuardModuleOptions,
  type HerdGuardOptionsFactory,
  HerdGuardModule,
  HerdGuardService,
  MemoryStore,
} from '../../../lib/index.js';
import { startContext } from '../../helpers/nest-app.js';

/** Boots an application context for `module` and returns the error that stopped it. */
async function bootstrapError(module: Type): Promise<unknown> {
  try {
    const app = await NestFactory.createApplicationContext(module, {
      logger: false,
      abortOnError: false,
    });
    await app.close();
  } catch (error) {
    return error;
  }
  throw new Error('expected the bootstrap to fail');
}

/** The field named by the ConfigurationError that stops an app whose options come from a factory. */
async function badOptionField(options: unknown): Promise<string> {
  @Module({
    imports: [
      HerdGuardModule.forRootAsync({ useFactory: () => options as HerdGuardModuleOptions }),
    ],
  })
  class AppModule {}
  const error = await bootstrapError(AppModule);
  expect(error).toBeInstanceOf(ConfigurationError);
  return (error as ConfigurationError).field;
}

const someStore = new MemoryStore();

describe('HerdGuardModule options', () => {
  it.each([
    ['options that are not an object', null, 'options'],
    ['an unknown option', { polcy: { soft: '1s' } }, 'polcy'],
    ['isGlobal inside the factory result', { isGlobal: true }, 'isGlobal'],
    ['a store without the HerdStore methods', { store: { get: () => undefined } }, 'store'],
    ['both store and redis', { store: someStore, redis: 'redis://127.0.0.1:6390' }, 'redis'],
    ['a redis value that is not a URL', { redis: 'localhost:6379' }, 'redis'],
    ['a redis value of the wrong type', { redis: 6379 }, 'redis'],
    ['memory options next to a store', { store: someStore, memory: { maxEntries: 10 } }, 'memory'],
    [
      'a memory size that is not a positive integer',
      { memory: { maxEntries: 0 } },
      'memory.maxEntries',
    ],
    ['an unknown memory option', { memory: { size: 10 } }, 'memory.size'],
    [
      'the removed Redis option fallbackEntries',
      { redis: { url: 'redis://127.0.0.1:6390', fallbackEntries: 10 } },
      'redis.fallbackEntries',
    ],
    ['an empty namespace', { namespace: '' }, 'namespace'],
    ['a namespace with spaces', { namespace: 'my app' }, 'namespace'],
    ['a policy that is not an object', { policy: '30s' }, 'policy'],
    ['an unknown policy field', { policy: { sfot: '1s' } }, 'policy.sfot'],
    [
      'a duration without a unit the parser knows',
      { policy: { soft: '30 seconds' } },
      'policy.soft',
    ],
    [
      'a hard TTL shorter than the soft TTL',
      { policy: { soft: '1m', hard: '10s' } },
      'policy.hard',
    ],
    ['a jitter fraction above 1', { policy: { jitter: 5 } }, 'policy.jitter'],
    ['a Redis URL with a port that is not a number', { redis: 'redis://localhost:port' }, 'redis'],
    ['a Redis URL with a port out of range', { redis: 'redis://localhost:70000' }, 'redis'],
    ['a Redis URL without a host', { redis: 'redis://:6379' }, 'redis'],
    [
      'a Redis URL with a database that is not a number',
      { redis: 'redis://localhost:6379/cache' },
      'redis',
    ],
    ['an invalid url inside redis', { redis: { url: 'redis://exa mple.com:6379' } }, 'redis.url'],
    [
      'a url inside redis of another scheme',
      { redis: { url: 'http://localhost:6379' } },
      'redis.url',
    ],
    [
      'an unknown field inside redis',
      { redis: { url: 'redis://127.0.0.1:6390', timeout: 100 } },
      'redis.timeout',
    ],
    [
      'a misspelt field inside redis',
      { redis: { url: 'redis://127.0.0.1:6390', namspace: 'app' } },
      'redis.namspace',
    ],
    ['a hot-key summary larger than it may be', { hotKeys: 10_001 }, 'hotKeys'],
    [
      'a bad Redis store option',
      { redis: { url: 'redis://127.0.0.1:6390', breakerThreshold: 0 } },
      'redis.breakerThreshold',
    ],
    [
      'an eviction policy Redis does not have',
      { redis: { url: 'redis://127.0.0.1:6390', evictionPolicy: 'lru' } },
      'redis.evictionPolicy',
    ],
    [
      'a number of replicas to wait for that is not a whole number',
      { redis: { url: 'redis://127.0.0.1:6390', waitForReplicas: 1.5 } },
      'redis.waitForReplicas',
    ],
    [
      'credentialHeaders that are not a list',
      { credentialHeaders: 'x-api-key' },
      'credentialHeaders',
    ],
    [
      'a credential header that is not a header name',
      { credentialHeaders: ['x-api-key', 'api key'] },
      'credentialHeaders[1]',
    ],
    ['an empty credential header name', { credentialHeaders: [''] }, 'credentialHeaders[0]'],
    [
      'a credential header that is not a string',
      { credentialHeaders: [42] },
      'credentialHeaders[0]',
    ],
    ['telemetry that is not a boolean or an object', { telemetry: 'otel' }, 'telemetry'],
    ['an unknown telemetry option', { telemetry: { traces: true } }, 'telemetry.traces'],
    [
      'a telemetry switch that is not a boolean',
      { telemetry: { rawKeys: 1 } },
      'telemetry.rawKeys',
    ],
  ])('fails the bootstrap on %s, naming the field', async (_, options, field) => {
    await expect(badOptionField(options)).resolves.toBe(field);
  });

  it('fails the bootstrap of a forRoot() module with a bad policy', async () => {
    @Module({ imports: [HerdGuardModule.forRoot({ policy: { soft: '-1s' as '1s' } })] })
    class AppModule {}
    await expect(bootstrapError(AppModule)).resolves.toMatchObject({ field: 'policy.soft' });
  });

  it('starts with no options at all: memory store, default policy', async () => {
    const app = await startContext(HerdGuardModule.forRoot());
    const herd = app.get(HerdGuardService);
    expect(herd.engine.store).toBeInstanceOf(MemoryStore);
    expect(herd.engine.defaults.softMs).toBe(30_000);
    await app.close();
  });

  it('closes the engine and the memory store it opened on application shutdown', async () => {
    const app = await startContext(HerdGuardModule.forRoot({ memory: { maxEntries: 5 } }));
    const herd = app.get(HerdGuardService);
    await herd.set('k', 'v');
    const store = herd.engine.store as MemoryStore;
    expect(store.size).toBe(1);
    await app.close();
    expect(herd.engine.closed).toBe(true);
    expect(store.size).toBe(0);
  });

  it('uses a store you pass and leaves it open on shutdown', async () => {
    const store = new MemoryStore();
    let closes = 0;
    const close = store.close.bind(store);
    store.close = async () => {
      closes += 1;
      await close();
    };
    const app = await startContext(HerdGuardModule.forRoot({ store }));
    await app.get(HerdGuardService).set('k', 'v');
    await app.close();
    expect(store.size).toBe(1);
    expect(closes).toBe(0);
  });

  it('reads its options from a forRootAsync useClass factory', async () => {
    @Injectable()
    class CacheConfig implements HerdGuardOptionsFactory {
      createHerdGuardOptions(): HerdGuardModuleOptions {
        return { policy: { soft: '45s' } };
      }
    }
    const app = await startContext(HerdGuardModule.forRootAsync({ useClass: CacheConfig }));
    expect(app.get(HerdGuardService).engine.defaults.softMs).toBe(45_000);
    await app.close();
  });

  it('is visible to feature modules without importing it when isGlobal is set', async () => {
    @Injectable()
    class Reader {
      constructor(readonly herd: HerdGuardService) {}
    }
    @Module({ providers: [Reader], exports: [Reader] })
    class FeatureModule {}
    @Module({ imports: [HerdGuardModule.forRoot({ isGlobal: true }), FeatureModule] })
    class AppModule {}
    const app = await startContext(AppModule);
    expect(app.get(Reader).herd).toBe(app.get(HerdGuardService));
    await app.close();
  });
});

describe('decorator options', () => {
  it('fails the bootstrap on a bad @Cached policy, naming the method and field', async () => {
    @Injectable()
    class Repo {
      @Cached({ soft: 'soon' as '1s' })
      async find(): Promise<number> {
        return 1;
      }
    }
    @Module({ imports: [HerdGuardModule.forRoot()], providers: [Repo] })
    class AppModule {}
    await expect(bootstrapError(AppModule)).resolves.toMatchObject({
      field: '@Cached(Repo.find).soft',
    });
  });

  it('checks a @Cached policy against the module default', async () => {
    @Injectable()
    class Repo {
      @Cached({ soft: '10m' })
      async find(): Promise<number> {
        return 1;
      }
    }
    @Module({
      imports: [HerdGuardModule.forRoot({ policy: { soft: '1m', hard: '5m' } })],
      providers: [Repo],
    })
    class AppModule {}
    await expect(bootstrapError(AppModule)).resolves.toMatchObject({
      field: '@Cached(Repo.find).hard',
    });
  });

  it('fails the bootstrap on a @Cached key that is not a function', async () => {
    @Injectable()
    class Repo {
      @Cached({ key: 'users' as unknown as () => string })
      async find(): Promise<number> {
        return 1;
      }
    }
    @Module({ imports: [HerdGuardModule.forRoot()], providers: [Repo] })
    class AppModule {}
    await expect(bootstrapError(AppModule)).resolves.toMatchObject({
      field: '@Cached(Repo.find).key',
    });
  });

  it('fails the bootstrap on a @Cached method that is neither async nor declared to return a Promise or Observable', async () => {
    @Injectable()
    class Repo {
      @Cached()
      // No return type declared, and not async: the point of this test.
      find() {
        return 1;
      }
    }
    @Module({ imports: [HerdGuardModule.forRoot()], providers: [Repo] })
    class AppModule {}
    const error = await bootstrapError(AppModule);
    expect(error).toMatchObject({ field: '@Cached(Repo.find)' });
    expect((error as Error).message).toContain('Observable');
  });

  it('fails the bootstrap on @Cached on a controller method, pointing to the interceptor', async () => {
    @Controller('items')
    class ItemsController {
      @Get()
      @Cached()
      async list(): Promise<string[]> {
        return [];
      }
    }
    @Module({ imports: [HerdGuardModule.forRoot()], controllers: [ItemsController] })
    class AppModule {}
    const error = await bootstrapError(AppModule);
    expect(error).toMatchObject({ field: '@Cached(ItemsController.list)' });
    expect((error as Error).message).toContain('HerdGuardInterceptor');
  });

  it('fails the bootstrap on bad @CachedRoute options, naming the route and field', async () => {
    @Controller('items')
    class ItemsController {
      @Get()
      @CachedRoute({ vary: 'accept-language' as unknown as string[] })
      list(): string[] {
        return [];
      }
    }
    @Module({ imports: [HerdGuardModule.forRoot()], controllers: [ItemsController] })
    class AppModule {}
    await expect(bootstrapError(AppModule)).resolves.toMatchObject({
      field: '@CachedRoute(ItemsController.list).vary',
    });
  });

  it('checks a @CachedRoute policy, the handler laid over its controller', async () => {
    @Controller('items')
    @CachedRoute({ soft: '1m' })
    class ItemsController {
      @Get()
      @CachedRoute({ hard: '10s' })
      list(): string[] {
        return [];
      }
    }
    @Module({ imports: [HerdGuardModule.forRoot()], controllers: [ItemsController] })
    class AppModule {}
    await expect(bootstrapError(AppModule)).resolves.toMatchObject({
      field: '@CachedRoute(ItemsController.list).hard',
    });
  });
});
