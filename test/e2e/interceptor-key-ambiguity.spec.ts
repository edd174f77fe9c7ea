import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { connect, type AddressInfo } from 'node:net';
import {
  Controller,
  Get,
  Headers,
  type INestApplication,
  Module,
  Query,
  Req,
} from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import request from 'supertest';
import { CachedRoute, HerdGuardInterceptor, HerdGuardModule } from '../../lib/index.js';
import { ADAPTERS, type AdapterName, startHttpApp } from '../helpers/nest-app.js';

@Controller()
class SiteController {
  /** A search page that shows the term it was asked for. */
  @Get('search')
  search(@Query('q') term?: string): { term: string | undefined } {
    return { term };
  }

  /**
   * A CMS-style catch-all: the page for the host and path asked for. It reads the whole Host, port
   * included (absolute links), so it varies by host: keys name the host name only.
   */
  @Get('*')
  @CachedRoute({ vary: ['host'] })
  page(
    @Headers('host') host: string | undefined,
    @Req() incoming: { url: string },
  ): { site: string; url: string } {
    return { site: host ?? 'no site', url: incoming.url };
  }
}

@Module({
  imports: [HerdGuardModule.forRoot({ policy: { soft: '30s', hard: '5m', jitter: 0 } })],
  controllers: [SiteController],
  providers: [{ provide: APP_INTERCEPTOR, useClass: HerdGuardInterceptor }],
})
class AppModule {}

/** Express as many Nest apps configure it for nested query objects (qs); Fastify as it comes. */
function configure(adapter: AdapterName): (app: INestApplication) => void {
  return (app) => {
    if (adapter === 'express') (app as NestExpressApplication).set('query parser', 'extended');
  };
}

/** Sends one raw HTTP/1.0 request (which may leave out Host) and returns the response text. */
function rawRequest(app: INestApplication, text: string): Promise<string> {
  const { port } = (app.getHttpServer() as { address(): AddressInfo }).address();
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.end(text));
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString()));
    socket.on('end', () => resolve(received));
    socket.on('error', reject);
  });
}

describe.each(ADAPTERS)(
  'HerdGuardInterceptor keys tell apart requests the handler tells apart on %s',
  (adapter) => {
    let app: INestApplication;
    const http = () => request(app.getHttpServer());

    beforeEach(async () => {
      app = await startHttpApp(adapter, AppModule, configure(adapter));
    });

    afterEach(async () => {
      await app.close();
    });

    it("never answers a site's page from a request that had no Host and a path naming that site", async () => {
      const planted = await rawRequest(app, 'GET //shop.example.com/home HTTP/1.0\r\n\r\n');
      expect(planted).toMatch(/^HTTP\/1\.1 200/);
      const visitor = await http().get('/home').set('Host', 'shop.example.com');
      expect(visitor.body).toEqual({ site: 'shop.example.com', url: '/home' });
    });

    it('never answers a request for one host with the page built for another port of it, on a route that varies by host', async () => {
      // A handler that builds absolute links reads the Host header, port included.
      await http().get('/home').set('Host', 'shop.example.com:1337');
      const visitor = await http().get('/home').set('Host', 'shop.example.com');
      expect(visitor.body.site).toBe('shop.example.com');
    });

    it('never answers a query with bytes that are not UTF-8 from the entry of another such query', async () => {
      // Latin-1 forms send é as %E9 and è as %E8; the handler reads each as it came.
      const first = await http().get('/search?q=caf%E9');
      const second = await http().get('/search?q=caf%E8');
      expect(first.body.term).toBe('caf%E9');
      expect(second.body.term).toBe('caf%E8');
    });
  },
);
