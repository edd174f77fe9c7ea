import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Controller, Get, type INestApplication, Module, Req } from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import request from 'supertest';
import { HerdGuardInterceptor, HerdGuardModule } from '../../lib/index.js';
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

@Controller()
class FormController {
  /** A form page with its CSRF token: the token belongs to the session in the visitor's cookie. */
  @Get('signup')
  signup(@Req() request: SessionMessage | { raw: SessionMessage }): { csrfToken: string | undefined } {
    return { csrfToken: sessionOf(request)?.csrfToken };
  }
}

@Module({
  imports: [HerdGuardModule.forRoot()],
  controllers: [FormController],
  providers: [{ provide: APP_INTERCEPTOR, useClass: HerdGuardInterceptor }],
})
class AppModule {}

/**
 * Session middleware as express-session (through on-headers: when the headers are written) and
 * @fastify/session (in an onSend hook) behave: a visitor without a cookie gets a new session, and
 * its Set-Cookie is added to the response as it is sent, after the handler and the interceptors ran.
 */
function withSessions(adapter: AdapterName): (app: INestApplication) => void {
  const open = (message: SessionMessage): void => {
    if (message.headers.cookie === undefined) message.session = { id: randomUUID(), csrfToken: randomUUID() };
  };
  if (adapter === 'express') {
    return (app) =>
      (app as NestExpressApplication).use((message: SessionMessage, response: ServerResponse, next: () => void) => {
        open(message);
        const writeHead = response.writeHead;
        response.writeHead = function (this: ServerResponse, ...args: Parameters<ServerResponse['writeHead']>) {
          if (message.session !== undefined) this.setHeader('Set-Cookie', `sid=${message.session.id}; HttpOnly`);
          return writeHead.apply(this, args);
        } as ServerResponse['writeHead'];
        next();
      });
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

describe.each(ADAPTERS)('HerdGuardInterceptor and a Set-Cookie added as the response is sent on %s', (adapter) => {
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
});
