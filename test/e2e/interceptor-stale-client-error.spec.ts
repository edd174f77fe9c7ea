import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import {
  Controller,
  ForbiddenException,
  Get,
  Injectable,
  type INestApplication,
  Module,
  NotFoundException,
  Param,
} from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import request from 'supertest';
import {
  Cached,
  CachedRoute,
  HerdGuardInterceptor,
  HerdGuardModule,
  HerdGuardService,
} from '../../lib/index.js';
import { deferred } from '../helpers/deferred.js';
import { ADAPTERS, startContext, startHttpApp } from '../helpers/nest-app.js';

/** The data source: products can be deleted, and documents can be withdrawn from the public. */
@Injectable()
class Catalog {
  readonly products = new Map<string, { id: string; name: string }>([
    ['1', { id: '1', name: 'kettle' }],
  ]);
  readonly publicDocuments = new Set<string>(['report']);
}

@Injectable()
class ProductsService {
  constructor(private readonly catalog: Catalog) {}

  /** As in the README's quick start: a missing product is a NotFoundException. */
  @Cached({
    soft: '1m',
    staleWhileRevalidate: false,
    key: (id: string) => `product:${id}`,
    tags: ['products'],
  })
  async findOne(id: string): Promise<{ id: string; name: string }> {
    const product = this.catalog.products.get(id);
    if (product === undefined) throw new NotFoundException(`No product ${id}`);
    return product;
  }
}

@Controller()
class CatalogController {
  constructor(private readonly catalog: Catalog) {}

  @Get('products/:id')
  @CachedRoute({ tags: ['products'], staleWhileRevalidate: false })
  product(@Param('id') id: string): { id: string; name: string } {
    const product = this.catalog.products.get(id);
    if (product === undefined) throw new NotFoundException(`No product ${id}`);
    return product;
  }

  /** Served with the default stale-while-revalidate: a withdrawn document answers 403. */
  @Get('documents/:name')
  @CachedRoute({ tags: ['documents'] })
  document(@Param('name') name: string): { name: string; text: string } {
    if (!this.catalog.publicDocuments.has(name))
      throw new ForbiddenException(`${name} is not public`);
    return { name, text: `the ${name}` };
  }
}

@Module({
  imports: [HerdGuardModule.forRoot({ policy: { soft: '30s', hard: '5m', jitter: 0 } })],
  controllers: [CatalogController],
  providers: [
    Catalog,
    ProductsService,
    { provide: APP_INTERCEPTOR, useClass: HerdGuardInterceptor },
  ],
})
class AppModule {}

/**
 * A stale value is served when its refresh fails (fail-safe, RFC 5861 stale-if-error: a 5xx or no
 * answer). A client error (4xx) is no failure: it is the backend's current answer, so a deleted
 * product or a withdrawn document must not live on until hard expiry.
 */
describe.each(ADAPTERS)(
  'HerdGuardInterceptor when a refresh answers a client error on %s',
  (adapter) => {
    let app: INestApplication;
    let catalog: Catalog;
    let herd: HerdGuardService;
    const http = () => request(app.getHttpServer());

    beforeEach(async () => {
      app = await startHttpApp(adapter, AppModule);
      catalog = app.get(Catalog);
      herd = app.get(HerdGuardService);
    });

    afterEach(async () => {
      await app.close();
    });

    it('answers 404 once the product was deleted and its entry expired, not the deleted product', async () => {
      expect((await http().get('/products/1')).body.name).toBe('kettle');
      catalog.products.delete('1');
      await herd.expireTag('products');
      const afterDelete = await http().get('/products/1');
      expect(afterDelete.status).toBe(404);
      expect(afterDelete.headers['x-cache']).toBeUndefined();
      expect(herd.stats().staleOnError).toBe(0);
    });

    it('stops serving a withdrawn document once its background refresh answered 403', async () => {
      await http().get('/documents/report');
      catalog.publicDocuments.delete('report');
      await herd.expireTag('documents');
      const refreshed = deferred<void>();
      herd.onEvent((event) => {
        if (event.type === 'load-failed' && event.background) refreshed.resolve();
      });
      // The first read after the expiry gets the stale entry at once, as stale-while-revalidate promises.
      expect((await http().get('/documents/report')).headers['x-cache']).toBe('STALE');
      await refreshed.promise;
      const afterRefresh = await http().get('/documents/report');
      expect(afterRefresh.status).toBe(403);
    });
  },
);

describe('@Cached when a refresh answers a client error', () => {
  it('makes the method reject with NotFoundException once its value was deleted and expired', async () => {
    const context = await startContext(AppModule);
    try {
      const [catalog, herd, products] = [
        context.get(Catalog),
        context.get(HerdGuardService),
        context.get(ProductsService),
      ];
      expect((await products.findOne('1')).name).toBe('kettle');
      catalog.products.delete('1');
      await herd.expire('product:1');
      await expect(products.findOne('1')).rejects.toBeInstanceOf(NotFoundException);
    } finally {
      await context.close();
    }
  });
});
