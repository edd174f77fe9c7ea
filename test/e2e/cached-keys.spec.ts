import { afterEach, describe, expect, it } from '@jest/globals';
import {
  Controller,
  Get,
  Inject,
  Injectable,
  type INestApplication,
  type InjectionToken,
  Module,
  Param,
} from '@nestjs/common';
import request from 'supertest';
import {
  Cached,
  ConfigurationError,
  HerdGuardModule,
  HerdGuardService,
  methodCacheKey,
} from '../../lib/index.js';
import { ADAPTERS, startHttpApp } from '../helpers/nest-app.js';

// Two classes with one name, as two feature modules of one app may well have.
const billing = (() => {
  @Injectable()
  class UsersService {
    @Cached()
    async find(id: string): Promise<string> {
      return `billing user ${id}`;
    }
  }
  return UsersService;
})();

const auth = (() => {
  @Injectable()
  class UsersService {
    @Cached()
    async find(id: string): Promise<string> {
      return `auth user ${id}`;
    }
  }
  return UsersService;
})();

/** The same name again, but told apart by its keyPrefix. */
const named = (() => {
  @Injectable()
  class UsersService {
    @Cached({ keyPrefix: 'auth.users.find' })
    async find(id: string): Promise<string> {
      return `auth user ${id}`;
    }
  }
  return UsersService;
})();

/** One class, instantiated once per region by factory providers. */
@Injectable()
class RegionUsers {
  constructor(readonly region: string) {}

  @Cached()
  async find(id: string): Promise<string> {
    return `${this.region} user ${id}`;
  }
}

function usersController(path: string, token: InjectionToken) {
  @Controller(path)
  class UsersController {
    constructor(@Inject(token) private readonly users: { find(id: string): Promise<string> }) {}

    @Get('users/:id')
    find(@Param('id') id: string): Promise<string> {
      return this.users.find(id);
    }
  }
  return UsersController;
}

function feature(path: string, service: new () => { find(id: string): Promise<string> }) {
  @Module({ providers: [service], controllers: [usersController(path, service)] })
  class FeatureModule {}
  return FeatureModule;
}

function appWith(...features: unknown[]) {
  @Module({ imports: [HerdGuardModule.forRoot({ isGlobal: true }), ...(features as [])] })
  class AppModule {}
  return AppModule;
}

describe.each(ADAPTERS)('@Cached keys on %s', (adapter) => {
  let app: INestApplication | undefined;

  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  it('fails the bootstrap when two providers named alike would share keys, asking for a keyPrefix', async () => {
    const started = startHttpApp(
      adapter,
      appWith(feature('billing', billing), feature('auth', auth)),
    );
    await expect(started).rejects.toBeInstanceOf(ConfigurationError);
    await expect(started).rejects.toMatchObject({ field: '@Cached(UsersService.find)' });
    await expect(started).rejects.toThrow(/keyPrefix/);
  });

  it('keeps two classes with one name apart once one has a keyPrefix', async () => {
    app = await startHttpApp(adapter, appWith(feature('billing', billing), feature('auth', named)));
    const billingUser = await request(app.getHttpServer()).get('/billing/users/1');
    const authUser = await request(app.getHttpServer()).get('/auth/users/1');
    expect([billingUser.text, authUser.text]).toEqual(['billing user 1', 'auth user 1']);
    const herd = app.get(HerdGuardService);
    await expect(herd.peek(methodCacheKey('auth.users.find', ['1']))).resolves.toMatchObject({
      value: 'auth user 1',
    });
  });

  it('gives two instances of one class from factory providers their own keys, named by their tokens', async () => {
    @Module({
      providers: [
        { provide: 'EU_USERS', useFactory: () => new RegionUsers('eu') },
        { provide: 'US_USERS', useFactory: () => new RegionUsers('us') },
      ],
      controllers: [usersController('eu', 'EU_USERS'), usersController('us', 'US_USERS')],
    })
    class RegionsModule {}
    app = await startHttpApp(adapter, appWith(RegionsModule));
    const eu = await request(app.getHttpServer()).get('/eu/users/1');
    const us = await request(app.getHttpServer()).get('/us/users/1');
    expect([eu.text, us.text]).toEqual(['eu user 1', 'us user 1']);
    await expect(
      app.get(HerdGuardService).peek(methodCacheKey('US_USERS.find', ['1'])),
    ).resolves.toMatchObject({
      value: 'us user 1',
    });
  });

  it('fails the bootstrap when one class is provided twice under its own name', async () => {
    @Module({
      providers: [{ provide: RegionUsers, useFactory: () => new RegionUsers('eu') }],
      exports: [RegionUsers],
    })
    class EuModule {}
    @Module({
      providers: [{ provide: RegionUsers, useFactory: () => new RegionUsers('us') }],
      exports: [RegionUsers],
    })
    class UsModule {}
    await expect(startHttpApp(adapter, appWith(EuModule, UsModule))).rejects.toMatchObject({
      field: '@Cached(RegionUsers.find)',
    });
  });

  it('fails the bootstrap on a class name a minifier could have produced, asking for a keyPrefix', async () => {
    const minified = (() => {
      @Injectable()
      class t {
        @Cached()
        async find(id: string): Promise<string> {
          return id;
        }
      }
      return t;
    })();
    await expect(startHttpApp(adapter, appWith(feature('m', minified)))).rejects.toThrow(
      /keyPrefix/,
    );
  });
});
