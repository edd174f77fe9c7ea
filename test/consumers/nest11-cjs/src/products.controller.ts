import { Controller, Get, Param, ParseIntPipe, UseInterceptors } from '@nestjs/common';
import { CachedRoute, HerdGuardInterceptor } from 'herd-guard';
import { Catalog, Product } from './catalog';

@Controller('products')
@UseInterceptors(HerdGuardInterceptor)
export class ProductsController {
  constructor(private readonly catalog: Catalog) {}

  @Get(':id')
  @CachedRoute({ soft: '30s' })
  findOne(@Param('id', ParseIntPipe) id: number): Promise<Product | undefined> {
    return this.catalog.find(id);
  }
}
