import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  ClassSerializerInterceptor,
  Controller,
  Get,
  type INestApplication,
  Module,
  type NestInterceptor,
  SerializeOptions,
  type Type,
  UseInterceptors,
} from '@nestjs/common';
import type { TransformerPackage } from '@nestjs/common/interfaces/external/transformer-package.interface.js';
import { APP_INTERCEPTOR, Reflector } from '@nestjs/core';
import request from 'supertest';
import { ConfigurationError, HerdGuardInterceptor, HerdGuardModule } from '../../lib/index.js';
import { ADAPTERS, type AdapterName, startHttpApp } from '../helpers/nest-app.js';
import { RedisServer, stopAllRedisServers } from '../helpers/redis-server.js';

/*
 * Nest's ClassSerializerInterceptor with a small stand-in for class-transformer (its
 * `transformerPackage` option): `@Excluded()` drops a field, `@ExposedTo(groups)` keeps one only for
 * those groups, as class-transformer's `@Exclude()` and `@Expose({ groups })` do. The field rules
 * live on the class, so a plain copy of an instance loses them.
 */
const EXCLUDED = Symbol('excluded');
const GROUPS = Symbol('groups');

type Rules = { [EXCLUDED]?: Set<string>; [GROUPS]?: Map<string, readonly string[]> };

function Excluded(): PropertyDecorator {
  return (prototype, name) => {
    const rules = prototype as Rules;
    rules[EXCLUDED] = new Set([...(rules[EXCLUDED] ?? []), String(name)]);
  };
}

function ExposedTo(groups: readonly string[]): PropertyDecorator {
  return (prototype, name) => {
    const rules = prototype as Rules;
    rules[GROUPS] = new Map([...(rules[GROUPS] ?? []), [String(name), groups]]);
  };
}

function toPlain(value: unknown, groups: readonly string[]): unknown {
  if (Array.isArray(value)) return value.map((item) => toPlain(item, groups));
  if (typeof value !== 'object' || value === null || value instanceof Date) return value;
  const rules = value as Rules;
  const plain: Record<string, unknown> = {};
  for (const [name, field] of Object.entries(value)) {
    if (rules[EXCLUDED]?.has(name)) continue;
    const only = rules[GROUPS]?.get(name);
    if (only !== undefined && !only.some((group) => groups.includes(group))) continue;
    plain[name] = toPlain(field, groups);
  }
  return plain;
}

const transformerPackage: TransformerPackage = {
  classToPlain: (value, options) =>
    toPlain(value, options?.groups ?? []) as Record<string, unknown>,
  plainToInstance: (type, plain) => Object.assign(Object.create(type.prototype as object), plain),
};

function serializer(): ClassSerializerInterceptor {
  return new ClassSerializerInterceptor(new Reflector(), { transformerPackage });
}

class UserEntity {
  readonly id = 7;
  readonly name = 'Ada';
  @Excluded() readonly passwordHash = 'secret-hash';
  @ExposedTo(['admin']) readonly email = 'ada@example.com';
}

/** Sent as its `toJSON()`, not as its fields. */
class Money {
  constructor(readonly cents: number) {}

  toJSON(): string {
    return `${(this.cents / 100).toFixed(2)} EUR`;
  }
}

const USER = '{"id":7,"name":"Ada"}';
const ADMIN = '{"id":7,"name":"Ada","email":"ada@example.com"}';

/** The routes, bound to the interceptors of one declaration order. */
function usersController(
  path: string,
  interceptors: {
    readonly controller?: ReadonlyArray<Type<NestInterceptor> | NestInterceptor>;
    readonly method?: ReadonlyArray<Type<NestInterceptor> | NestInterceptor>;
  },
) {
  const onClass = UseInterceptors(...(interceptors.controller ?? []));
  const onMethod = UseInterceptors(...(interceptors.method ?? []));

  @Controller(path)
  @onClass
  class UsersController {
    @Get('user')
    @onMethod
    user(): UserEntity {
      return new UserEntity();
    }

    @Get('admin')
    @onMethod
    @SerializeOptions({ groups: ['admin'] })
    admin(): UserEntity {
      return new UserEntity();
    }
  }
  return UsersController;
}

interface Order {
  readonly name: string;
  readonly path: string;
  readonly controller: Type;
  readonly providers?: readonly object[];
}

/** Orders in which ClassSerializerInterceptor runs inside HerdGuardInterceptor. */
const INNER_ORDERS: readonly Order[] = [
  {
    name: 'both on the method, the cache first',
    path: 'method',
    controller: usersController('method', { method: [HerdGuardInterceptor, serializer()] }),
  },
  {
    name: 'the cache on the controller, the serializer on the method',
    path: 'split',
    controller: usersController('split', {
      controller: [HerdGuardInterceptor],
      method: [serializer()],
    }),
  },
  {
    name: 'both global (APP_INTERCEPTOR), the cache first',
    path: 'global',
    controller: usersController('global', {}),
    providers: [
      { provide: APP_INTERCEPTOR, useClass: HerdGuardInterceptor },
      { provide: APP_INTERCEPTOR, useValue: serializer() },
    ],
  },
];

function appModule(order: Order, redis: string, namespace: string): Type {
  @Module({
    imports: [HerdGuardModule.forRoot({ redis, namespace })],
    controllers: [order.controller],
    providers: [...(order.providers ?? [])] as Type[],
  })
  class AppModule {}
  return AppModule;
}

/** The same routes with the serializer alone: what the cache must answer, byte for byte. */
function uncachedModule(): Type {
  @Module({ controllers: [usersController('uncached', { method: [serializer()] })] })
  class UncachedModule {}
  return UncachedModule;
}

let server: RedisServer;

beforeAll(async () => {
  server = await RedisServer.start();
});

afterAll(async () => {
  await stopAllRedisServers();
});

describe.each(ADAPTERS)('ClassSerializerInterceptor inside the cache (%s)', (adapter) => {
  let uncached: INestApplication;

  beforeAll(async () => {
    uncached = await startHttpApp(adapter, uncachedModule());
  });

  afterAll(async () => {
    await uncached.close();
  });

  describe.each(INNER_ORDERS)('$name', (order) => {
    let pods: INestApplication[] = [];

    beforeAll(async () => {
      const module = appModule(order, server.url, `serializer-${adapter}-${order.path}`);
      pods = [await startHttpApp(adapter, module), await startHttpApp(adapter, module)];
    });

    afterAll(async () => {
      for (const pod of pods) await pod.close();
    });

    it.each([
      ['user', USER],
      ['admin', ADMIN],
    ])(
      'answers /%s with the bytes of the uncached route on MISS, HIT and on the other pod',
      async (route, expected) => {
        const [loader, other] = pods as [INestApplication, INestApplication];
        const path = `/${order.path}/${route}`;
        const plain = await request(uncached.getHttpServer()).get(`/uncached/${route}`);
        const miss = await request(loader.getHttpServer()).get(path);
        const hit = await request(loader.getHttpServer()).get(path);
        const elsewhere = await request(other.getHttpServer()).get(path);
        expect(plain.text).toBe(expected);
        expect([miss.headers['x-cache'], hit.headers['x-cache']]).toEqual(['MISS', 'HIT']);
        expect(elsewhere.headers['x-cache']).toBe('HIT');
        for (const answer of [miss, hit, elsewhere]) {
          expect(answer.text).toBe(plain.text);
          expect(answer.headers['content-type']).toBe(plain.headers['content-type']);
        }
      },
    );
  });
});

/** Orders in which ClassSerializerInterceptor runs outside HerdGuardInterceptor. */
const OUTER_ORDERS: ReadonlyArray<{
  readonly name: string;
  readonly module: () => Type;
  readonly configure?: (app: INestApplication) => void;
}> = [
  {
    name: 'the serializer global (APP_INTERCEPTOR), the cache on the method',
    module: () => {
      @Module({
        imports: [HerdGuardModule.forRoot()],
        controllers: [usersController('outer', { method: [HerdGuardInterceptor] })],
        providers: [{ provide: APP_INTERCEPTOR, useValue: serializer() }],
      })
      class AppModule {}
      return AppModule;
    },
  },
  {
    name: 'the serializer global (useGlobalInterceptors), the cache on the controller',
    module: () => {
      @Module({
        imports: [HerdGuardModule.forRoot()],
        controllers: [usersController('outer', { controller: [HerdGuardInterceptor] })],
      })
      class AppModule {}
      return AppModule;
    },
    configure: (app) => app.useGlobalInterceptors(serializer()),
  },
  {
    name: 'both on the method, the serializer first',
    module: () => {
      @Module({
        imports: [HerdGuardModule.forRoot()],
        controllers: [usersController('outer', { method: [serializer(), HerdGuardInterceptor] })],
      })
      class AppModule {}
      return AppModule;
    },
  },
];

describe.each(ADAPTERS)('ClassSerializerInterceptor outside the cache (%s)', (adapter) => {
  it.each(OUTER_ORDERS)('fails the bootstrap, naming the fix: $name', async (order) => {
    const failure = await startHttpApp(adapter as AdapterName, order.module(), order.configure)
      .then((app) => app.close())
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ConfigurationError);
    expect(String(failure)).toMatch(
      /UsersController\.user.*ClassSerializerInterceptor.*inside HerdGuardInterceptor/,
    );
  });
});

@Controller('prices')
@UseInterceptors(HerdGuardInterceptor)
class PricesController {
  @Get('one')
  one(): { readonly price: Money; readonly at: Date } {
    return { price: new Money(999), at: new Date(Date.UTC(2026, 0, 2)) };
  }

  @Get('money')
  money(): Money {
    return new Money(1250);
  }
}

describe.each(ADAPTERS)('a body with toJSON() (%s)', (adapter) => {
  let pods: INestApplication[] = [];

  beforeAll(async () => {
    @Module({
      imports: [HerdGuardModule.forRoot({ redis: server.url, namespace: `to-json-${adapter}` })],
      controllers: [PricesController],
    })
    class AppModule {}
    pods = [await startHttpApp(adapter, AppModule), await startHttpApp(adapter, AppModule)];
  });

  afterAll(async () => {
    for (const pod of pods) await pod.close();
  });

  it('answers /prices/one as its JSON on MISS, HIT and on the other pod', async () => {
    const [loader, other] = pods as [INestApplication, INestApplication];
    const answers = [
      await request(loader.getHttpServer()).get('/prices/one'),
      await request(loader.getHttpServer()).get('/prices/one'),
      await request(other.getHttpServer()).get('/prices/one'),
    ];
    expect(answers.map((answer) => answer.headers['x-cache'])).toEqual(['MISS', 'HIT', 'HIT']);
    for (const answer of answers)
      expect(answer.text).toBe('{"price":"9.99 EUR","at":"2026-01-02T00:00:00.000Z"}');
  });

  it('passes a body whose toJSON() is no object through uncached, with the JSON Nest sends', async () => {
    // Stored, its view would reach outer interceptors as text, not as the handler's value.
    const [loader, other] = pods as [INestApplication, INestApplication];
    const answers = [
      await request(loader.getHttpServer()).get('/prices/money'),
      await request(other.getHttpServer()).get('/prices/money'),
    ];
    for (const answer of answers) {
      expect(answer.headers['x-cache']).toBeUndefined();
      expect(answer.text).toBe('"12.50 EUR"');
    }
  });
});
