import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import {
  type CanActivate,
  Controller,
  type ExecutionContext,
  Get,
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

/**
 * README: `scope` is "the user or tenant the response belongs to. Scoped responses get their own
 * entry". A scope hook reads the request, and `getRequest()` is typed `any`: a hook that returns
 * the user object instead of its id (`ctx => req.user`), or `null` for "nobody" (`req.user?.id ??
 * null`), compiles. Whatever it returns, two users must never share an entry (DESIGN: "Bad input
 * gets a clear error at the place it enters").
 */

type AuthenticatedRequest = {
  headers: Record<string, string | undefined>;
  user?: { id: string } | null;
};

/** Sets `request.user` from the bearer token, as Passport's guards do. */
@Injectable()
class BearerGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<AuthenticatedRequest>();
    const token = req.headers['authorization']?.replace(/^Bearer /, '');
    req.user = token === undefined ? null : { id: token };
    return true;
  }
}

@Controller()
@UseGuards(BearerGuard)
class InboxController {
  /** Forgot `.id`: the hook returns the user object. */
  @Get('inbox')
  @CachedRoute({ scope: (context) => context.switchToHttp().getRequest().user })
  inbox(@Req() req: AuthenticatedRequest): { owner: string | undefined } {
    return { owner: req.user?.id };
  }

  /** A numeric id: the scope is its decimal form. */
  @Get('orders')
  @CachedRoute({ scope: (context) => Number(context.switchToHttp().getRequest().user?.id) })
  orders(@Req() req: AuthenticatedRequest): { owner: string | undefined } {
    return { owner: req.user?.id };
  }

  /** `null` for a request without a user, the user's id otherwise. */
  @Get('drafts')
  @CachedRoute({ scope: (context) => context.switchToHttp().getRequest().user?.id ?? null })
  drafts(@Req() req: AuthenticatedRequest): {
    owner: string | undefined;
    cookie: string | undefined;
  } {
    return { owner: req.user?.id, cookie: req.headers['cookie'] };
  }
}

@Module({
  imports: [HerdGuardModule.forRoot({ policy: { soft: '1m' } })],
  controllers: [InboxController],
  providers: [{ provide: APP_INTERCEPTOR, useClass: HerdGuardInterceptor }],
})
class AppModule {}

describe.each(ADAPTERS)(
  'HerdGuardInterceptor with a scope hook that returns no string on %s',
  (adapter) => {
    let app: INestApplication;
    const http = () => request(app.getHttpServer());

    beforeEach(async () => {
      app = await startHttpApp(adapter, AppModule);
    });

    afterEach(async () => {
      await app.close();
    });

    it("never answers Bob with Alice's inbox when the scope hook returns the user object", async () => {
      const alice = await http()
        .get('/inbox')
        .set('Host', 'mail.test')
        .set('Authorization', 'Bearer alice');
      const bob = await http()
        .get('/inbox')
        .set('Host', 'mail.test')
        .set('Authorization', 'Bearer bob');
      expect(bob.body).not.toEqual({ owner: 'alice' });
      // The hook's mistake is reported where it enters: every request of the route fails, none is cached.
      expect([alice.status, bob.status]).toEqual([500, 500]);
      expect(alice.headers['x-cache']).toBeUndefined();
    });

    it('keys a numeric scope by its decimal form, one entry per user', async () => {
      const first = await http()
        .get('/orders')
        .set('Host', 'mail.test')
        .set('Authorization', 'Bearer 7');
      const second = await http()
        .get('/orders')
        .set('Host', 'mail.test')
        .set('Authorization', 'Bearer 8');
      const again = await http()
        .get('/orders')
        .set('Host', 'mail.test')
        .set('Authorization', 'Bearer 7');
      expect([first.body, second.body, again.body]).toEqual([
        { owner: '7' },
        { owner: '8' },
        { owner: '7' },
      ]);
      expect([
        first.headers['x-cache'],
        second.headers['x-cache'],
        again.headers['x-cache'],
      ]).toEqual(['MISS', 'MISS', 'HIT']);
      expect(again.headers['cache-control']).toMatch(/private/);
    });

    it("never answers one visitor's cookie-bearing request with another's when the scope hook returns null", async () => {
      const first = await http()
        .get('/drafts')
        .set('Host', 'mail.test')
        .set('Cookie', 'cart=visitor-1');
      expect(first.body).toEqual({ cookie: 'cart=visitor-1' });
      const second = await http()
        .get('/drafts')
        .set('Host', 'mail.test')
        .set('Cookie', 'cart=visitor-2');
      expect(second.body).not.toEqual({ cookie: 'cart=visitor-1' });
    });
  },
);
