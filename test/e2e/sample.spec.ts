import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import request from 'supertest';
import { AppModule } from '../../sample/app.module.js';
import type { SampleConfig } from '../../sample/config.js';
import { sleep } from '../helpers/deferred.js';
import { parsePrometheusText, sampleValue } from '../helpers/prometheus-text.js';
import { RedisServer, stopAllRedisServers } from '../helpers/redis-server.js';

const CONFIG: SampleConfig = {
  host: '127.0.0.1',
  port: 0,
  redisUrl: undefined,
  databaseFile: ':memory:',
  queryDelayMs: 50,
  soft: '300ms',
  hard: '1m',
};

let app: INestApplication | undefined;

async function startSample(overrides: Partial<SampleConfig> = {}): Promise<INestApplication> {
  app = await NestFactory.create(AppModule.register({ ...CONFIG, ...overrides }), {
    logger: false,
    abortOnError: false,
  });
  await app.listen(0, '127.0.0.1');
  return app;
}

async function databaseQueries(server: INestApplication): Promise<number> {
  const response = await request(server.getHttpServer()).get('/stats').expect(200);
  return (response.body as { databaseQueries: number }).databaseQueries;
}

async function metrics(server: INestApplication) {
  const response = await request(server.getHttpServer()).get('/metrics').expect(200);
  expect(response.headers['content-type']).toContain('text/plain');
  return parsePrometheusText(response.text);
}

afterEach(async () => {
  await app?.close();
  app = undefined;
  await stopAllRedisServers();
});

describe('sample app', () => {
  it('runs one database query for a burst of 300 requests on a product after its soft expiry, and /metrics counts it', async () => {
    // A soft TTL longer than the burst takes, so the one refresh stays fresh until the burst ends.
    const server = await startSample({ soft: '2s', hard: '1m' });
    const http = server.getHttpServer();
    await request(http).get('/products/7').expect(200).expect('X-Cache', 'MISS');
    await sleep(2_300); // past soft (2 s, plus up to 10 % jitter), well before hard (1 min)
    const queriesBefore = await databaseQueries(server);
    const before = await metrics(server);
    const responses = await Promise.all(
      Array.from({ length: 300 }, () => request(http).get('/products/7')),
    );
    expect(responses.every((response) => response.status === 200 && response.body.id === 7)).toBe(
      true,
    );
    const stale = responses.filter((response) => response.headers['x-cache'] === 'STALE').length;
    expect(stale).toBeGreaterThan(0);
    await sleep(200); // the one background refresh lands
    expect((await databaseQueries(server)) - queriesBefore).toBe(1);
    const after = await metrics(server);
    const delta = (name: string, labels: Record<string, string>): number =>
      sampleValue(after, name, labels) - sampleValue(before, name, labels);
    expect(delta('herd_guard_requests_total', { result: 'stale' })).toBe(stale);
    expect(delta('herd_guard_requests_total', { result: 'fresh' })).toBe(300 - stale);
    expect(delta('herd_guard_loads_total', { result: 'ok', trigger: 'refresh' })).toBe(1);
    expect(sampleValue(after, 'herd_guard_loader_duration_seconds_count', { result: 'ok' })).toBe(
      2,
    );
    expect(sampleValue(after, 'herd_guard_store_degraded', { cache: 'catalog' })).toBe(0);
  });

  it('answers 404 for a missing product from the negative cache, querying the database once', async () => {
    const server = await startSample();
    const http = server.getHttpServer();
    const queriesBefore = await databaseQueries(server);
    for (let i = 0; i < 20; i += 1) await request(http).get('/products/999999').expect(404);
    expect((await databaseQueries(server)) - queriesBefore).toBe(1);
    expect(
      sampleValue(await metrics(server), 'herd_guard_requests_total', { result: 'negative' }),
    ).toBe(19);
  });

  it('serves the category aggregate from a @Cached method: 200 concurrent requests, one query', async () => {
    // Fresh for longer than the burst takes on a busy machine, so no refresh adds a query.
    const server = await startSample({ soft: '1m', hard: '2m' });
    const http = server.getHttpServer();
    const responses = await Promise.all(
      Array.from({ length: 200 }, () => request(http).get('/categories')),
    );
    expect(
      responses.every((response) => response.status === 200 && response.body.length === 8),
    ).toBe(true);
    expect(await databaseQueries(server)).toBe(1);
  });

  it('serves the old price at once after an update, then the new one after one refresh', async () => {
    const server = await startSample({ soft: '1h', hard: '2h' });
    const http = server.getHttpServer();
    const original = (await request(http).get('/products/3').expect(200)).body.priceCents as number;
    await request(http).post('/products/3/price').send({ priceCents: 1 }).expect(200);
    const stale = await request(http).get('/products/3').expect(200);
    expect(stale.headers['x-cache']).toBe('STALE');
    expect(stale.body.priceCents).toBe(original);
    await sleep(150);
    const fresh = await request(http).get('/products/3').expect(200);
    expect(fresh.body.priceCents).toBe(1);
    await request(http).post('/products/3/price').send({ priceCents: 'free' }).expect(400);
  });

  it('refreshes a product read under a padded id (/products/042) after its price update', async () => {
    const server = await startSample({ soft: '1h', hard: '2h' });
    const http = server.getHttpServer();
    const original = (await request(http).get('/products/042').expect(200)).body
      .priceCents as number;
    await request(http)
      .post('/products/42/price')
      .send({ priceCents: original + 1 })
      .expect(200);
    await request(http).get('/products/042').expect(200).expect('X-Cache', 'STALE');
    await sleep(150); // the one background refresh lands
    const fresh = await request(http).get('/products/042').expect(200);
    expect(fresh.body).toMatchObject({ id: 42, priceCents: original + 1 });
  });

  it('answers 400 for an id that is not a number, and caches nothing for it', async () => {
    const server = await startSample();
    const http = server.getHttpServer();
    const queriesBefore = await databaseQueries(server);
    for (let i = 0; i < 3; i += 1) {
      const response = await request(http).get('/products/4x2').expect(400);
      expect(response.headers['x-cache']).toBeUndefined();
    }
    expect((await databaseQueries(server)) - queriesBefore).toBe(0);
    const stats = await request(http).get('/stats').expect(200);
    expect(stats.body.cache.reads).toEqual({ fresh: 0, stale: 0, miss: 0, negative: 0 });
  });

  it('lists the hottest keys as JSON, by hash: a key holds the URL, with whatever it carries', async () => {
    const server = await startSample();
    const http = server.getHttpServer();
    for (let i = 0; i < 3; i += 1) await request(http).get('/products/1?token=s3cr3t');
    await request(http).get('/products/2');
    const hot = await request(http).get('/cache/hot-keys?top=1').expect(200);
    // The key names the host name the request was sent to, not the port.
    const key = 'http:GET ProductsController.product //127.0.0.1/products/1?token=s3cr3t';
    const hash = createHash('sha256').update(key).digest('hex').slice(0, 16);
    expect(hot.body.requested).toEqual([{ key: `#${hash}`, count: 3, error: 0 }]);
    const stats = await request(http).get('/stats').expect(200);
    expect(stats.text).not.toMatch(/products|s3cr3t/);
  });

  it('reports health up on the memory store', async () => {
    const server = await startSample();
    const health = await request(server.getHttpServer()).get('/health').expect(200);
    expect(health.body).toMatchObject({
      status: 'ok',
      details: { cache: { status: 'up', store: 'memory' } },
    });
  });

  it('reports health degraded (still HTTP 200) when the Redis it runs on is stopped, and keeps serving', async () => {
    const redis = await RedisServer.start();
    const server = await startSample({ redisUrl: redis.url });
    const http = server.getHttpServer();
    await request(http)
      .get('/health')
      .expect(200, /"status":"ok"/);
    await request(http).get('/products/5').expect(200);
    await redis.stop();
    let health = await request(http).get('/health');
    for (let attempt = 0; attempt < 50 && health.body.status !== 'degraded'; attempt += 1) {
      await sleep(20);
      health = await request(http).get('/health');
    }
    expect(health.status).toBe(200);
    expect(health.body).toMatchObject({
      status: 'degraded',
      details: { cache: { status: 'degraded', store: 'redis' } },
    });
    await request(http).get('/products/5').expect(200);
    expect(
      sampleValue(await metrics(server), 'herd_guard_store_degraded', { cache: 'catalog' }),
    ).toBe(1);
  });
});
