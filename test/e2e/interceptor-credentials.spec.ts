import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import {
  type CanActivate,
  Controller,
  type ExecutionContext,
  Get,
  Headers,
  type INestApplication,
  Injectable,
  Module,
  Req,
  UseGuards,
} from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import request from 'supertest';
import { CachedRoute, HerdGuardInterceptor, HerdGuardModule } from '../../lib/index.js';
import { ADAPTERS, startHttpApp } from '../helpers/nest-app.js';
import { Runs } from '../helpers/runs.js';

/** The users of the app, by API key. */
const USERS: Readonly<Record<string, string>> = { 'key-ann': 'ann', 'key-bob': 'bob' };

type GuardedRequest = {
  headers: Record<string, string | undefined>;
  user?: { name: string };
};

/** Who an API key belongs to (`anonymous` without one), as a handler reading the header answers. */
function owner(apiKey: string | undefined): string {
  return apiKey === undefined ? 'anonymous' : (USERS[apiKey] ?? 'unknown');
}

/** An API-key guard as apps write one: it attaches the key's user to the request. */
@Injectable()
class ApiKeyGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<GuardedRequest>();
    const name = USERS[req.headers['x-api-key'] ?? ''];
    if (name !== undefined) req.user = { name };
    return true;
  }
}

@Controller()
@UseGuards(ApiKeyGuard)
class ProfileController {
  constructor(private readonly runs: Runs) {}

  @Get('profile')
  profile(@Req() req: GuardedRequest): { user: string; run: number } {
    return { user: req.user?.name ?? 'anonymous', run: this.runs.next('profile') };
  }

  @Get('catalog')
  @CachedRoute({ shareAcrossUsers: true })
  catalog(): { items: string[]; run: number } {
    return { items: ['a', 'b'], run: this.runs.next('catalog') };
  }
}

/** No guard: the handler reads the key itself, so only the header tells the request is private. */
@Controller()
class KeyedController {
  constructor(private readonly runs: Runs) {}

  @Get('keyed')
  keyed(@Headers('x-api-key') apiKey?: string): { user: string; run: number } {
    return { user: owner(apiKey), run: this.runs.next('keyed') };
  }
}

@Module({
  imports: [HerdGuardModule.forRoot()],
  controllers: [ProfileController, KeyedController],
  providers: [Runs, ApiKeyGuard, { provide: APP_INTERCEPTOR, useClass: HerdGuardInterceptor }],
})
class AppModule {}

@Module({
  imports: [HerdGuardModule.forRoot({ credentialHeaders: ['X-API-Key'] })],
  controllers: [KeyedController],
  providers: [Runs, { provide: APP_INTERCEPTOR, useClass: HerdGuardInterceptor }],
})
class KeyedModule {}

describe.each(ADAPTERS)('HerdGuardInterceptor keeps API-key users apart on %s', (adapter) => {
  let app: INestApplication;
  let runs: Runs;
  const http = () => request(app.getHttpServer());

  afterEach(async () => {
    await app.close();
  });

  describe('with a guard that attaches the user', () => {
    beforeEach(async () => {
      app = await startHttpApp(adapter, AppModule);
      runs = app.get(Runs);
    });

    it('never answers a request a guard attached a user to from the entry of another user', async () => {
      const ann = await http().get('/profile').set('X-API-Key', 'key-ann');
      const bob = await http().get('/profile').set('X-API-Key', 'key-bob');
      expect([ann.body.user, bob.body.user]).toEqual(['ann', 'bob']);
      expect(runs.of('profile')).toBe(2);
      expect(bob.headers['x-cache']).toBeUndefined();
      expect(bob.headers['cache-control']).toBeUndefined();
    });

    it('still caches the requests the guard attached no user to', async () => {
      await http().get('/profile');
      const again = await http().get('/profile');
      expect(again.headers['x-cache']).toBe('HIT');
      expect(again.body).toEqual({ user: 'anonymous', run: 1 });
    });

    it('shares a route with shareAcrossUsers between the users a guard identified', async () => {
      await http().get('/catalog').set('X-API-Key', 'key-ann');
      const bob = await http().get('/catalog').set('X-API-Key', 'key-bob');
      expect(bob.headers['x-cache']).toBe('HIT');
      expect(bob.body.run).toBe(1);
    });

    it('shares a request with a credential header the module was not told of (its guard attached no user)', async () => {
      await http().get('/keyed').set('X-API-Key', 'key-ann');
      const bob = await http().get('/keyed').set('X-API-Key', 'key-bob');
      // What credentialHeaders is for: without it, nothing says the header is a credential.
      expect(bob.headers['x-cache']).toBe('HIT');
    });
  });

  describe('with credentialHeaders', () => {
    beforeEach(async () => {
      app = await startHttpApp(adapter, KeyedModule);
      runs = app.get(Runs);
    });

    it('never answers a request with a header named in credentialHeaders from the entry of another user', async () => {
      const ann = await http().get('/keyed').set('X-API-Key', 'key-ann');
      const bob = await http().get('/keyed').set('X-API-Key', 'key-bob');
      expect([ann.body.user, bob.body.user]).toEqual(['ann', 'bob']);
      expect(runs.of('keyed')).toBe(2);
      expect(bob.headers['x-cache']).toBeUndefined();
    });

    it('still caches requests without that header', async () => {
      await http().get('/keyed');
      const again = await http().get('/keyed');
      expect(again.headers['x-cache']).toBe('HIT');
      expect(again.body).toEqual({ user: 'anonymous', run: 1 });
    });
  });
});
