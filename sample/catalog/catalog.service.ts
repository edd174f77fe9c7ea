import { Injectable } from '@nestjs/common';
import { Cached } from '../../lib/index.js';
import { CatalogDatabase, type CategorySummary, type Product } from './catalog.database.js';

/** The tag of everything cached about one product, whatever URL or argument spelt its id. */
export function productTag(id: number): string {
  return `product:${id}`;
}

/** Catalog reads through herd-guard: concurrent calls with equal arguments run one query. */
@Injectable()
export class CatalogService {
  constructor(private readonly db: CatalogDatabase) {}

  /** One product, or `null` (cached as "not found" for the negative TTL, so bad ids cannot hammer the database). */
  @Cached({ key: (id: number) => `product:${id}`, tags: (id: number) => [productTag(id)] })
  async product(id: number): Promise<Product | null> {
    return (await this.db.findProduct(id)) ?? null;
  }

  /** An aggregate over the whole table: the kind of query a stampede must never run 300 times. */
  @Cached({ key: () => 'category-summary', tags: ['products'] })
  async categorySummary(): Promise<CategorySummary[]> {
    return this.db.categorySummary();
  }

  @Cached({ tags: ['products'] })
  async productsIn(category: string, limit: number): Promise<Product[]> {
    return this.db.productsIn(category, limit);
  }
}
