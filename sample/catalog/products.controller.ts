import {
  BadRequestException,
  Body,
  Controller,
  Get,
  HttpCode,
  NotFoundException,
  Param,
  ParseIntPipe,
  Post,
  Query,
  UseInterceptors,
} from '@nestjs/common';
import type { ExecutionContext } from '@nestjs/common';
import { CachedRoute, HerdGuardInterceptor, HerdGuardService } from '../../lib/index.js';
import { CatalogDatabase, type CategorySummary, type Product } from './catalog.database.js';
import { CatalogService, productTag } from './catalog.service.js';
import { NotFoundOnNullInterceptor } from './not-found-on-null.interceptor.js';

/**
 * The route's tags, from the id as a number: `/products/042` and `/products/42` are two URLs (two
 * entries) of one product, and `expireTag(productTag(42))` must reach both. The interceptor runs
 * before `ParseIntPipe`, hence the parsing here; an id the pipe rejects is answered 400 and cached
 * under no tag.
 */
function productRouteTags(context: ExecutionContext): string[] {
  const { params } = context.switchToHttp().getRequest<{ params: { id: string } }>();
  return [productTag(Number(params.id)), 'products'];
}

@Controller()
export class ProductsController {
  constructor(
    private readonly db: CatalogDatabase,
    private readonly catalog: CatalogService,
    private readonly cache: HerdGuardService,
  ) {}

  /**
   * Cached per URL by the interceptor (X-Cache, Age, Cache-Control). A missing product is cached
   * as "not found" (negative TTL) and answered 404 by the outer interceptor.
   */
  @Get('products/:id')
  @UseInterceptors(NotFoundOnNullInterceptor, HerdGuardInterceptor)
  @CachedRoute({ tags: productRouteTags })
  async product(@Param('id', ParseIntPipe) id: number): Promise<Product | null> {
    return (await this.db.findProduct(id)) ?? null;
  }

  /** Served by a `@Cached` service method. */
  @Get('categories')
  categories(): Promise<CategorySummary[]> {
    return this.catalog.categorySummary();
  }

  @Get('categories/:name/products')
  async productsIn(@Param('name') name: string, @Query('limit') limit = '20'): Promise<Product[]> {
    const products = await this.catalog.productsIn(
      name,
      Math.min(100, Math.max(1, Number(limit) || 20)),
    );
    if (products.length === 0) throw new NotFoundException(`No category "${name}"`);
    return products;
  }

  /**
   * Changes a price, then marks the product and the summary stale (not deleted): the next reads get
   * the old price at once while one refresh runs, instead of all waiting on the database.
   */
  @Post('products/:id/price')
  @HttpCode(200)
  async setPrice(
    @Param('id', ParseIntPipe) id: number,
    @Body() body: { priceCents?: unknown },
  ): Promise<{ expired: number }> {
    const priceCents = body.priceCents;
    if (typeof priceCents !== 'number' || !Number.isInteger(priceCents) || priceCents < 0) {
      throw new BadRequestException('priceCents must be a non-negative integer');
    }
    if (!this.db.setPrice(id, priceCents)) throw new NotFoundException(`No product ${id}`);
    const expired = await this.cache.expireTag(productTag(id));
    await this.cache.expire('category-summary');
    return { expired };
  }
}
