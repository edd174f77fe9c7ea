import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  BadRequestException,
  Controller,
  Get,
  Injectable,
  type INestApplication,
  Module,
  Post,
  UseInterceptors,
} from '@nestjs/common';
import type { Redis } from 'ioredis';
import request from 'supertest';
import {
  CachedRoute,
  HerdGuardInterceptor,
  HerdGuardModule,
  HerdGuardService,
  type HerdGuardModuleOptions,
} from '../../lib/index.js';
import { deferred, flush, until } from '../helpers/deferred.js';
import { startContext, startHttpApp } from '../helpers/nest-app.js';
import { RedisServer, stopAllRedisServers } from '../helpers/redis-server.js';

let server: RedisServer;
let admin: Redis;

beforeAll(async () => {
  server = await RedisServer.start();
  admin = server.client();
});

afterAll(async () => {
  admin.disconnect();
  await stopAllRedisServers();
});

@Injectable()
class Prices {
  runs = 0;
  gate: Promise<void> = Promise.resolve();
}

@Controller('prices')
@UseInterceptors(HerdGuardInterceptor)
class PricesController {
  constructor(private readonly prices: Prices) {}

  @Get()
  async list(): Promise<{ eur: number }> {
    this.prices.runs += 1;
    await this.prices.gate;
    return { eur: 42 };
  }
}

/** What the stock routes answer: written by POSTs on any pod, read by the GET. */
@Injectable()
class Stock {
  count = 0;
}

@Controller('stock')
@UseInterceptors(HerdGuardInterceptor)
class StockController {
  constructor(private readonly stock: Stock) {}

  @Get()
  read(): { count: number } {
    return { count: this.stock.count };
  }

  @Post()
  add(): { count: number } {
    this.stock.count += 1;
    return { count: this.stock.count };
  }

  @Post('invalid')
  invalid(): never {
    this.stock.count += 1;
    throw new BadRequestException('no quantity');
  }

  @Post('audit')
  @CachedRoute({ invalidateOnWrite: false })
  audit(): { audited: true } {
    this.stock.count += 1;
    return { audited: true };
  }
}

function appModule(options: HerdGuardModuleOptions) {
  @Module({
    imports: [HerdGuardModule.forRoot(options)],
    controllers: [PricesController, StockController],
    providers: [Prices, Stock],
  })
  class AppModule {}
  return AppModule;
}

/** A property that reads and writes `target.count`, so several objects share one value. */
function accessor(target: { count: number }): PropertyDescriptor {
  return {
    get: () => target.count,
    set: (value: number) => {
      target.count = value;
    },
  };
}

async function connectedClients(): Promise<number> {
  const list = (await admin.call('CLIENT', 'LIST')) as string;
  return list.trim().split('\n').length;
}

describe('HerdGuardModule with Redis', () => {
  it('runs a cold route once for two apps (two pods) sharing one Redis, 100 concurrent GETs each', async () => {
    const module = appModule({ redis: server.url, namespace: 'e2e-pods' });
    const pods = [await startHttpApp('express', module), await startHttpApp('fastify', module)];
    try {
      const gate = deferred<void>();
      for (const pod of pods) pod.get(Prices).gate = gate.promise;
      const responses = Promise.all(
        pods.flatMap((pod: INestApplication) =>
          // Each pod listens on a port of its own; keys name the host name, so they share entries.
          Array.from({ length: 100 }, () => request(pod.getHttpServer()).get('/prices')),
        ),
      );
      // One pod runs the handler; the other found the lease taken and waits for the fill.
      await until(
        () => pods.some((pod) => pod.get(HerdGuardService).stats().waits.started > 0),
        10_000,
        'the second pod to wait for the fill',
      );
      gate.resolve();
      const all = await responses;
      expect(pods.map((pod) => pod.get(Prices).runs).reduce((sum, runs) => sum + runs)).toBe(1);
      expect(all.every((response) => response.status === 200 && response.body.eur === 42)).toBe(
        true,
      );
    } finally {
      await Promise.all(pods.map((pod) => pod.close()));
    }
  });

  describe('two pods sharing one Redis and one database', () => {
    let pods: INestApplication[];
    const stock = { count: 0 };
    const get = (pod: INestApplication) => request(pod.getHttpServer()).get('/stock').expect(200);
    const post = (pod: INestApplication, path: string) =>
      request(pod.getHttpServer()).post(`/stock${path}`);

    beforeAll(async () => {
      const module = appModule({ redis: server.url, namespace: 'e2e-writes' });
      pods = [await startHttpApp('express', module), await startHttpApp('fastify', module)];
      // One database behind both pods.
      for (const pod of pods) Object.defineProperty(pod.get(Stock), 'count', accessor(stock));
    });

    afterAll(async () => {
      await Promise.all(pods.map((pod) => pod.close()));
    });

    /** Caches `/stock` through pod B: its next GET is a HIT. */
    async function cacheOnB(): Promise<void> {
      await get(pods[1]!);
      expect((await get(pods[1]!)).headers['x-cache']).toBe('HIT');
    }

    it('answers the next GET on pod B with a MISS and the new data after a POST on pod A', async () => {
      await cacheOnB();
      const written = await post(pods[0]!, '').expect(201);
      const read = await get(pods[1]!);
      expect(read.headers['x-cache']).toBe('MISS');
      expect(read.body).toEqual(written.body);
    });

    it('keeps pod B’s entry after a POST on pod A that fails with a 4xx', async () => {
      await cacheOnB();
      await post(pods[0]!, '/invalid').expect(400);
      expect((await get(pods[1]!)).headers['x-cache']).toBe('HIT');
    });

    it('keeps pod B’s entry after a POST on pod A whose route opts out', async () => {
      await cacheOnB();
      await post(pods[0]!, '/audit').expect(201);
      expect((await get(pods[1]!)).headers['x-cache']).toBe('HIT');
    });
  });

  it('closes the Redis connections it opened on shutdown', async () => {
    const before = await connectedClients();
    const app = await startContext(
      appModule({ redis: { url: server.url, namespace: 'e2e-close' } }),
    );
    expect(app.get(HerdGuardService).health().status).toBe('up');
    expect(await connectedClients()).toBeGreaterThan(before);
    await app.close();
    // The server notices a QUIT shortly after the client sends it.
    let after = await connectedClients();
    const giveUpAt = Date.now() + 2_000;
    while (after !== before && Date.now() < giveUpAt) {
      await flush();
      after = await connectedClients();
    }
    expect(after).toBe(before);
  });

  it('leaves a client you pass open on shutdown', async () => {
    const client = server.client();
    try {
      const app = await startContext(appModule({ redis: { client, namespace: 'e2e-own' } }));
      await app.get(HerdGuardService).set('k', 'v');
      await app.close();
      expect(client.status).toBe('ready');
      await expect(client.ping()).resolves.toBe('PONG');
    } finally {
      client.disconnect();
    }
  });
});
