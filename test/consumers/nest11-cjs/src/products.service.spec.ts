import { Test, type TestingModule } from '@nestjs/testing';
import { HerdGuardModule } from 'herd-guard';
import { Catalog } from './catalog';
import { ProductsService } from './products.service';

describe('ProductsService', () => {
  let moduleRef: TestingModule;
  let catalog: Catalog;
  let products: ProductsService;

  beforeEach(async () => {
    moduleRef = await Test.createTestingModule({
      imports: [HerdGuardModule.forRoot()],
      providers: [Catalog, ProductsService],
    }).compile();
    await moduleRef.init();
    catalog = moduleRef.get(Catalog);
    products = moduleRef.get(ProductsService);
  });

  afterEach(() => moduleRef.close());

  it('runs one catalog query for 50 concurrent calls of a @Cached method, then serves them from the cache', async () => {
    let release!: () => void;
    catalog.gate = new Promise<void>((resolve) => (release = resolve));

    const calls = Array.from({ length: 50 }, () => products.findOne(7));
    release();

    expect(await Promise.all(calls)).toEqual(Array(50).fill({ id: 7, name: 'product 7' }));
    expect(await products.findOne(7)).toEqual({ id: 7, name: 'product 7' });
    expect(catalog.queries).toBe(1);
  });
});
