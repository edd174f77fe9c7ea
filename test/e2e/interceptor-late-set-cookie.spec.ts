import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  Controller,
  Get,
  type INestApplication,
  Injectable,
  Module,
  Req,
  UseInterceptors,
} from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import request from 'supertest';
import {
  CachedRoute,
  HerdGuardInterceptor,
  HerdGuardModule,
  HerdGuardService,
} from '../../lib/index.js';
import { deferred, until } from '../helpers/deferred.js';
import { ADAPTERS, type AdapterName, startHttpApp } from '../helpers/nest-app.js';

/** A new visitor's session: its id goes out in a cookie, its CSRF token in the page. */
interface Session {
  readonly id: string;
  readonly csrfToken: string;
}

type SessionMessage = IncomingMessage & { session?: Session };

/** The Node.js request underneath (Express's request is one; Fastify's request holds it as `raw`). */
function sessionOf(request: SessionMessage | { raw: SessionMessage }): Session | undefined {
  return 'raw' in request ? request.raw.session : request.session;
}

/** Holds the welcome page's runs until the test opens it, so that requests pile up on one run. */
@Injectable()
class Gate {
  opened: Promise<void> = Promise.resolve();
}

@Controller()
class FormController {
  constructor(private readonly gate: Gate) {}

  /** The same form page, slow to build. */
  @Get('welcome')
  async welcome(
    @Req() request: SessionMessage | { raw: SessionMessage },
  ): Promise<{ csrfToken: string | undefined }> {
    await this.gate.opened;
    return { csrfToken: sessionOf(request)?.csrfToken };
  }

  /** A form page with its CSRF token: the token belongs to the session in the visitor's cookie. */
  @Get('signup')
  signup(@Req() request: SessionMessage | { raw: SessionMessage }): {
    csrfToken: string | undefined;
  } {
    return { csrfToken: sessionOf(request)?.csrfToken };
  }
}

/** The form page of a site whose session middleware opens a session only for some visitors (`X-Visitor`). */
@Controller()
@UseInterceptors(HerdGuardInterceptor)
class AccountController {
  @Get('account-form')
  @CachedRoute({ tags: ['forms'] })
  form(@Req() request: SessionMessage | { raw: SessionMessage }): {
    csrfToken: string | undefined;
  } {
    return { csrfToken: sessionOf(request)?.csrfToken };
  }
}

@Module({ imports: [HerdGuardModule.forRoot()], controllers: [AccountController] })
class AccountModule {}

@Module({
  imports: [HerdGuardModule.forRoot()],
  controllers: [FormController],
  providers: [Gate, { provide: APP_INTERCEPTOR, useClass: HerdGuardInterceptor }],
})
class AppModule {}

/**
 * Session middleware as express-session (through on-headers: when the headers are written) and
 * @fastify/session (in an onSend hook) behave: a visitor without a cookie gets a new session, and
 * its Set-Cookie is added to the response as it is sent, after the handler and the interceptors ran.
 */
function withSessions(
  adapter: AdapterName,
  opens: (message: SessionMessage) => Session | undefined = (message) =>
    message.headers.cookie === undefined
      ? { id: randomUUID(), csrfToken: randomUUID() }
      : undefined,
): (app: INestApplication) => void {
  const open = (message: SessionMessage): void => {
    message.session = opens(message);
  };
  if (adapter === 'express') {
    return (app) =>
      (app as NestExpressApplication).use(
        (message: SessionMessage, response: ServerResponse, next: () => void) => {
          open(message);
          const writeHead = response.writeHead;
          response.writeHead = function (
            this: ServerResponse,
            ...args: Parameters<ServerResponse['writeHead']>
          ) {
            if (message.session !== undefined)
              this.setHeader('Set-Cookie', `sid=${message.session.id}; HttpOnly`);
            return writeHead.apply(this, args);
          } as ServerResponse['writeHead'];
          next();
        },
      );
  }
  return (app) => {
    const fastify = (app as NestFastifyApplication).getHttpAdapter().getInstance();
    fastify.addHook('onRequest', (fastifyRequest, _reply, done) => {
      open(fastifyRequest.raw);
      done();
    });
    fastify.addHook('onSend', (fastifyRequest, reply, payload, done) => {
      const session = (fastifyRequest.raw as SessionMessage).session;
      if (session !== undefined) void reply.header('set-cookie', `sid=${session.id}; HttpOnly`);
      done(null, payload);
    });
  };
}

describe.each(ADAPTERS)(
  'HerdGuardInterceptor and a Set-Cookie added as the response is sent on %s',
  (adapter) => {
    let app: INestApplication;
    const http = () => request(app.getHttpServer());

    beforeEach(async () => {
      app = await startHttpApp(adapter, AppModule, withSessions(adapter));
    });

    afterEach(async () => {
      await app.close();
    });

    it("never stores a response that went out with a session cookie, so no visitor gets another one's CSRF token", async () => {
      const alice = await http().get('/signup');
      const bob = await http().get('/signup');
      expect(alice.headers['set-cookie']).toHaveLength(1);
      expect(bob.headers['set-cookie']).toHaveLength(1);
      expect(bob.body.csrfToken).not.toBe(alice.body.csrfToken);
    });

    it('never marks a response that went out with a session cookie as storable by shared caches downstream', async () => {
      const alice = await http().get('/signup');
      expect(alice.headers['set-cookie']).toHaveLength(1);
      // A CDN that stored it would hand Alice's session cookie to everyone.
      expect(alice.headers['cache-control'] ?? 'no-store').toMatch(/private|no-store/);
    });

    it('never answers the requests that joined a run with the body whose response then went out with a session cookie', async () => {
      const gate = deferred();
      app.get(Gate).opened = gate.promise;
      const visitors = Promise.all(
        [1, 2, 3].map(() =>
          http()
            .get('/welcome')
            .then((response) => response),
        ),
      );
      await until(
        () => app.get(HerdGuardService).stats().coalesced >= 2,
        5_000,
        'two requests to join the first run',
      );
      gate.resolve();
      const responses = await visitors;
      expect(responses.map((response) => response.headers['set-cookie'])).toEqual([
        expect.any(Array),
        expect.any(Array),
        expect.any(Array),
      ]);
      expect(new Set(responses.map((response) => response.body.csrfToken)).size).toBe(3);
    });
  },
);

describe.each(ADAPTERS)(
  'HerdGuardInterceptor refreshing for a request that got a session cookie on %s',
  (adapter) => {
    let app: INestApplication;
    const http = () => request(app.getHttpServer());

    beforeEach(async () => {
      const visitor = (message: SessionMessage): Session | undefined => {
        const name = message.headers['x-visitor'];
        return typeof name === 'string'
          ? { id: randomUUID(), csrfToken: `csrf-${name}` }
          : undefined;
      };
      app = await startHttpApp(adapter, AccountModule, withSessions(adapter, visitor));
    });

    afterEach(async () => {
      await app.close();
    });

    it("never stores the background refresh run for a stale answer that went out with a visitor's session cookie", async () => {
      const herd = app.get(HerdGuardService);
      expect((await http().get('/account-form')).body).toEqual({});
      await herd.expireTag('forms');
      // Bob's request is answered stale at once; the refresh then runs the handler with Bob's new session.
      const bob = await http().get('/account-form').set('X-Visitor', 'bob');
      expect(bob.headers['x-cache']).toBe('STALE');
      expect(bob.headers['set-cookie']).toHaveLength(1);
      expect(bob.headers['cache-control']).toMatch(/private|no-store/);
      await until(() => herd.engine.activity().inflight === 0, 5_000, 'the refresh to end');
      const carol = await http().get('/account-form');
      expect(carol.body.csrfToken).not.toBe('csrf-bob');
    });

    it('never marks a fresh hit that went out with a session cookie as storable by shared caches downstream', async () => {
      expect((await http().get('/account-form')).headers['x-cache']).toBe('MISS');
      // Bob's request is answered from the entry; his new session's cookie is added as it goes out.
      const bob = await http().get('/account-form').set('X-Visitor', 'bob');
      expect(bob.headers['x-cache']).toBe('HIT');
      expect(bob.headers['set-cookie']).toHaveLength(1);
      expect(bob.headers['cache-control']).toMatch(/private|no-store/);
      // The next anonymous visitor still gets the shared entry, with its shareable Cache-Control.
      const carol = await http().get('/account-form');
      expect(carol.headers['x-cache']).toBe('HIT');
      expect(carol.headers['set-cookie']).toBeUndefined();
      expect(carol.headers['cache-control']).toMatch(/^max-age=/);
    });
  },
);
