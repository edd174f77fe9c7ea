import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  Controller,
  Get,
  type INestApplication,
  Injectable,
  Module,
  NotFoundException,
  Param,
  UseInterceptors,
} from '@nestjs/common';
import request from 'supertest';
import {
  Cached,
  HerdGuardInterceptor,
  HerdGuardModule,
  type HerdGuardModuleOptions,
  HerdGuardService,
} from '../../lib/index.js';
import { until } from '../helpers/deferred.js';
import { ADAPTERS, startHttpApp } from '../helpers/nest-app.js';
import { RedisServer, stopAllRedisServers } from '../helpers/redis-server.js';

/** The database of the README quick start, shared by every pod of a test. */
const db = { products: new Map<string, { id: string; name: string }>() };

/** The README's ProductsService: a `@Cached` read and a rename that expires the product's key. */
@Injectable()
class ProductsService {
  constructor(private readonly herd: HerdGuardService) {}

  @Cached({ soft: '1m', key: (id: string) => `product:${id}`, tags: ['products'] })
  async findOne(id: string): Promise<{ id: string; name: string }> {
    const product = db.products.get(id);
    if (product === undefined) throw new NotFoundException(`No product ${id}`);
    return { ...product };
  }

  async rename(id: string, name: string): Promise<void> {
    db.products.set(id, { id, name });
    await this.herd.expire(`product:${id}`);
  }
}

/** The README's ProductsController: an intercepted route over the `@Cached` method. */
@Controller('products')
@UseInterceptors(HerdGuardInterceptor)
class ProductsController {
  constructor(private readonly products: ProductsService) {}

  @Get(':id')
  findOne(@Param('id') id: string): Promise<{ id: string; name: string }> {
    return this.products.findOne(id);
  }
}

function appModule(options: HerdGuardModuleOptions) {
  @Module({
    imports: [
      HerdGuardModule.forRoot({ isGlobal: true, policy: { soft: '30s', hard: '10m' }, ...options }),
    ],
    controllers: [ProductsController],
    providers: [ProductsService],
  })
  class AppModule {}
  return AppModule;
}

async function idle(pods: readonly INestApplication[]): Promise<void> {
  await until(() =>
    pods.every((pod) => {
      const activity = pod.get(HerdGuardService).engine.activity();
      return activity.inflight === 0 && activity.pendingStoreOps === 0;
    }),
  );
}

let server: RedisServer;

beforeAll(async () => {
  server = await RedisServer.start();
});

afterAll(async () => {
  await stopAllRedisServers();
});

describe.each(ADAPTERS)('README quick start over HTTP (%s)', (adapter) => {
  it.each([
    ['on one pod (memory store)', 1],
    ['on two pods (Redis)', 2],
  ])(
    'serves the old name at most once after rename() and expire(), then the new one, %s',
    async (_label, count) => {
      db.products.set('9', { id: '9', name: 'alpha' });
      const options: HerdGuardModuleOptions =
        count === 1 ? {} : { redis: server.url, namespace: `quick-${adapter}-${Date.now()}` };
      const pods: INestApplication[] = [];
      try {
        for (let i = 0; i < count; i += 1)
          pods.push(await startHttpApp(adapter, appModule(options)));
        const writer = pods[0]!;
        const reader = pods[pods.length - 1]!;
        // Each pod listens on a port of its own; keys name the host name, so they share entries.
        const get = (pod: INestApplication) => request(pod.getHttpServer()).get('/products/9');

        expect((await get(writer)).body).toEqual({ id: '9', name: 'alpha' });
        await idle(pods);
        const hit = await get(reader);
        expect(hit.headers['x-cache']).toBe('HIT');

        await writer.get(ProductsService).rename('9', 'beta');

        // The old name at most once, and then only as STALE (its refresh runs in the background).
        const first = await get(reader);
        if (first.body.name === 'alpha') expect(first.headers['x-cache']).toBe('STALE');
        else expect(first.body.name).toBe('beta');
        await idle(pods);
        for (const pod of pods) {
          const after = await get(pod);
          expect(after.body).toEqual({ id: '9', name: 'beta' });
          expect(after.headers['x-cache']).toBe('HIT');
        }
      } finally {
        for (const pod of pods) await pod.close();
      }
    },
  );
});
