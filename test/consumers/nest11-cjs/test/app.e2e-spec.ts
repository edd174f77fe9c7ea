import { Test, type TestingModule } from '@nestjs/testing';
import { type INestApplication } from '@nestjs/common';
import request from 'supertest';
import { type App } from 'supertest/types';
import { AppModule } from './../src/app.module';
import { Catalog } from './../src/catalog';

describe('ProductsController (e2e)', () => {
  let app: INestApplication<App>;

  beforeEach(async () => {
    const moduleFixture: TestingModule = await Test.createTestingModule({
      imports: [AppModule],
    }).compile();

    app = moduleFixture.createNestApplication();
    await app.init();
  });

  afterEach(async () => {
    await app.close();
  });

  const get = (path: string) => request(app.getHttpServer()).get(path);

  it('answers GET /products/1 with X-Cache MISS, then HIT from the cache without a second query', async () => {
    const first = await get('/products/1').expect(200);
    expect(first.headers['x-cache']).toBe('MISS');
    expect(first.body).toEqual({ id: 1, name: 'product 1' });

    const second = await get('/products/1').expect(200);
    expect(second.headers['x-cache']).toBe('HIT');
    expect(second.headers['cache-control']).toMatch(/^max-age=\d+, stale-while-revalidate=\d+$/);
    expect(second.body).toEqual({ id: 1, name: 'product 1' });
    expect(app.get(Catalog).queries).toBe(1);
  });
});
