import { describe, expect, it } from '@jest/globals';
import {
  Controller,
  Get,
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
  HerdGuardService,
} from '../../lib/index.js';
import { ADAPTERS, startHttpApp } from '../helpers/nest-app.js';

/** The database of the README quick start. */
const db = { products: new Map<string, { id: string; name: string }>() };

@Injectable()
class ProductsService {
  constructor(private readonly herd: HerdGuardService) {}

  @Cached({ soft: '1m', key: (id: string) => `product:${id}` })
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

@Controller('products')
@UseInterceptors(HerdGuardInterceptor)
class ProductsController {
  constructor(private readonly products: ProductsService) {}

  @Get(':id')
  findOne(@Param('id') id: string): Promise<{ id: string; name: string }> {
    return this.products.findOne(id);
  }
}

@Module({
  imports: [
    HerdGuardModule.forRoot({ isGlobal: true, policy: { soft: '30s', hard: '10m', jitter: 0 } }),
  ],
  controllers: [ProductsController],
  providers: [ProductsService],
})
class AppModule {}

/** How long a downstream cache (browser, CDN) may still reuse a response as fresh: max-age - Age, in s. */
function downstreamFreshnessSeconds(headers: Record<string, string>): number {
  const maxAge = /max-age=(\d+)/.exec(headers['cache-control'] ?? '');
  if (maxAge === null) throw new Error(`no max-age in ${headers['cache-control']}`);
  return Number(maxAge[1]) - Number(headers['age']);
}

describe.each(ADAPTERS)(
  'Cache-Control of a route invalidated through its input (%s)',
  (adapter) => {
    it('does not let a downstream cache reuse as fresh the old body it serves as STALE after rename() and expire()', async () => {
      db.products.set('9', { id: '9', name: 'alpha' });
      const app = await startHttpApp(adapter, AppModule);
      try {
        const get = () => request(app.getHttpServer()).get('/products/9');
        await get();
        const hit = await get();
        expect(hit.headers['x-cache']).toBe('HIT');

        await app.get(ProductsService).rename('9', 'beta');

        const stale = await get();
        expect(stale.body).toEqual({ id: '9', name: 'alpha' });
        expect(stale.headers['x-cache']).toBe('STALE');
        // herd-guard itself no longer serves this body as fresh: neither may a cache in front of it.
        expect(
          downstreamFreshnessSeconds(stale.headers as Record<string, string>),
        ).toBeLessThanOrEqual(0);
      } finally {
        await app.close();
      }
    });
  },
);
