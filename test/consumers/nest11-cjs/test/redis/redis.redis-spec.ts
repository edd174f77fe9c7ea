import { Controller, Get, INestApplication } from '@nestjs/common';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { Test } from '@nestjs/testing';
import { HerdGuardHealthIndicator, HerdGuardModule } from 'herd-guard';
import { RedisStore, type RedisStoreOptions } from 'herd-guard/redis';
import { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import request from 'supertest';
import { App } from 'supertest/types';
import { Catalog } from './../../src/catalog';
import { ProductsController } from './../../src/products.controller';

/** Run by test/consumers/run-consumers.mjs with the optional peers installed and REDIS_URL set. */
const redisUrl = process.env.REDIS_URL;
const namespace = `nest11-${process.pid}-${Date.now()}`;

@Controller('health')
class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly herdGuard: HerdGuardHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    // terminus 11 knows only up and down: a degraded store is reported as up (details say degraded).
    return this.health.check([() => this.herdGuard.isHealthy('cache', { degradedAs: 'up' })]);
  }
}

/** One pod of the app: its own Nest application, catalog and registry, on the shared Redis. */
async function startPod(
  redis: RedisStoreOptions,
): Promise<{ app: INestApplication<App>; registry: Registry }> {
  const registry = new Registry();
  const moduleRef = await Test.createTestingModule({
    imports: [
      HerdGuardModule.forRoot({ isGlobal: true, redis, metrics: { registry } }),
      TerminusModule,
    ],
    controllers: [ProductsController, HealthController],
    providers: [Catalog],
  }).compile();
  const app = moduleRef.createNestApplication<INestApplication<App>>();
  await app.init();
  return { app, registry };
}

describe('herd-guard on Redis with the installed ioredis, prom-client and terminus', () => {
  const pods: INestApplication[] = [];
  let client: Redis;

  beforeAll(() => {
    if (!redisUrl) throw new Error('REDIS_URL is not set: run this through npm run test:matrix');
    client = new Redis(redisUrl);
  });

  afterAll(async () => {
    await Promise.all(pods.map((pod) => pod.close()));
    await client.quit();
  });

  it('serves a product loaded by one pod to another as a HIT from Redis', async () => {
    const first = await startPod({ url: redisUrl, namespace });
    const second = await startPod({ client, namespace });
    pods.push(first.app, second.app);

    // Each pod is reached on a port of its own; keys name the host name, so they share entries.
    const product = (app: INestApplication<App>) =>
      request(app.getHttpServer()).get('/products/3').expect(200);
    const miss = await product(first.app);
    expect(miss.headers['x-cache']).toBe('MISS');
    const hit = await product(second.app);
    expect(hit.headers['x-cache']).toBe('HIT');
    expect(hit.body).toEqual({ id: 3, name: 'product 3' });
    expect(first.app.get(Catalog).queries).toBe(1);
    expect(second.app.get(Catalog).queries).toBe(0);

    expect(await second.registry.metrics()).toMatch(
      /herd_guard_requests_total\{cache="[^"]+",result="fresh"\} 1/,
    );
    const health = await request(second.app.getHttpServer()).get('/health').expect(200);
    expect(health.body.info.cache).toMatchObject({ status: 'up', store: 'redis' });
  });

  it('builds a RedisStore from herd-guard/redis on a client the app owns', async () => {
    const store = new RedisStore({ client, namespace });
    await store.ready();
    expect(store.health().status).toBe('up');
    await store.close();
    expect(await client.ping()).toBe('PONG');
  });
});
