import { get as httpGet } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import {
  Controller,
  Get,
  Injectable,
  type INestApplication,
  type MessageEvent,
  Module,
  Res,
  Sse,
} from '@nestjs/common';
import { APP_INTERCEPTOR, HttpAdapterHost } from '@nestjs/core';
import { Observable, interval, map, take } from 'rxjs';
import request from 'supertest';
import { CachedRoute, HerdGuardInterceptor, HerdGuardModule } from '../../lib/index.js';
import { until } from '../helpers/deferred.js';
import { ADAPTERS, startHttpApp } from '../helpers/nest-app.js';

/** Subscriptions to the handlers' Observables that are still open, and handler runs. */
@Injectable()
class Probe {
  open = 0;
  runs = 0;

  /** An Observable that emits every `periodMs` and never completes, counting its open subscriptions. */
  endless<T>(value: (tick: number) => T, periodMs = 5): Observable<T> {
    return new Observable<T>((subscriber) => {
      this.open += 1;
      let tick = 0;
      const timer = setInterval(() => subscriber.next(value(tick++)), periodMs);
      return () => {
        clearInterval(timer);
        this.open -= 1;
      };
    });
  }
}

@Controller()
class StreamsController {
  constructor(
    private readonly probe: Probe,
    private readonly adapterHost: HttpAdapterHost,
  ) {}

  @Sse('events')
  events(): Observable<MessageEvent> {
    return interval(5).pipe(
      take(3),
      map((tick) => ({ data: { tick } })),
    );
  }

  @Sse('live')
  live(): Observable<MessageEvent> {
    return this.probe.endless((tick) => ({ data: { tick } }));
  }

  /** Not SSE: an Observable that never completes, bounded by the loader timeout. */
  @Get('ticks')
  @CachedRoute({ loaderHardTimeout: '100ms' })
  ticks(): Observable<number> {
    return this.probe.endless((tick) => tick);
  }

  /** The same without a loader timeout of its own: only the application's shutdown ends it. */
  @Get('forever')
  forever(): Observable<number> {
    return this.probe.endless((tick) => tick);
  }

  @Get('raw')
  raw(@Res() response: unknown): void {
    this.probe.runs += 1;
    this.adapterHost.httpAdapter.reply(response, { run: this.probe.runs }, 200);
  }

  @Get('readable')
  async readable(): Promise<Readable> {
    this.probe.runs += 1;
    return Readable.from([`chunk ${this.probe.runs}`]);
  }
}

@Module({
  imports: [HerdGuardModule.forRoot({ policy: { soft: '30s', hard: '5m', jitter: 0 } })],
  controllers: [StreamsController],
  providers: [Probe, { provide: APP_INTERCEPTOR, useClass: HerdGuardInterceptor }],
})
class AppModule {}

/** Opens an SSE request, resolves with the text received once `events` events arrived, then hangs up. */
function readEvents(app: INestApplication, path: string, events: number): Promise<string> {
  const { port } = (app.getHttpServer() as { address(): AddressInfo }).address();
  return new Promise((resolve, reject) => {
    const req = httpGet(
      { host: '127.0.0.1', port, path, headers: { accept: 'text/event-stream' } },
      (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => {
          text += chunk;
          if (text.split('\n\n').length > events) {
            req.destroy();
            resolve(text);
          }
        });
        response.on('error', () => undefined);
      },
    );
    req.on('error', (error) => {
      if (!req.destroyed) reject(error);
    });
  });
}

describe.each(ADAPTERS)(
  'HerdGuardInterceptor leaves streams and raw responses alone on %s',
  (adapter) => {
    let app: INestApplication;
    let probe: Probe;
    const http = () => request(app.getHttpServer());

    beforeEach(async () => {
      app = await startHttpApp(adapter, AppModule);
      probe = app.get(Probe);
    });

    afterEach(async () => {
      await app.close();
    });

    it('sends every event of an @Sse() route under the global interceptor', async () => {
      const response = await http().get('/events').buffer(true);
      expect(response.status).toBe(200);
      expect(response.headers['content-type']).toMatch(/text\/event-stream/);
      expect(response.text).toContain('data: {"tick":0}');
      expect(response.text).toContain('data: {"tick":1}');
      expect(response.text).toContain('data: {"tick":2}');
      expect(response.headers['x-cache']).toBeUndefined();
    });

    it("unsubscribes an @Sse() handler's Observable when the client goes away", async () => {
      const text = await readEvents(app, '/live', 2);
      expect(text).toContain('data: {"tick":1}');
      await until(() => probe.open === 0, 2_000, 'the SSE subscription to close');
    });

    it("unsubscribes a handler's Observable that never completes once the loader times out", async () => {
      const response = await http().get('/ticks');
      expect(response.status).toBe(504);
      await until(() => probe.open === 0, 2_000, 'the handler subscription to close');
    });

    it("unsubscribes a handler's Observable that never completes when the application closes", async () => {
      const other = await startHttpApp(adapter, AppModule);
      const otherProbe = other.get(Probe);
      const { port } = (other.getHttpServer() as { address(): AddressInfo }).address();
      const pending = httpGet({ host: '127.0.0.1', port, path: '/forever' });
      pending.on('error', () => undefined);
      await until(() => otherProbe.open === 1, 2_000, 'the handler to be subscribed');
      pending.destroy();
      await other.close();
      expect(otherProbe.open).toBe(0);
    });

    it('answers every request of a @Res() handler: the route is never cached', async () => {
      const first = await http().get('/raw').timeout(2_000);
      const second = await http().get('/raw').timeout(2_000);
      expect([first.body.run, second.body.run]).toEqual([1, 2]);
      expect(second.headers['x-cache']).toBeUndefined();
    });

    it('streams a Readable returned by the handler to each request, never caching it', async () => {
      const first = await http().get('/readable');
      const second = await http().get('/readable');
      expect([first.status, second.status]).toEqual([200, 200]);
      expect(second.text).toBe('chunk 2');
      expect(second.headers['x-cache']).toBeUndefined();
    });
  },
);
