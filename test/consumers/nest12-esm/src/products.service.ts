import { Injectable, NotFoundException } from '@nestjs/common';
import { Cached } from 'herd-guard';
import { Catalog, Product } from './catalog.js';

@Injectable()
export class ProductsService {
  constructor(private readonly catalog: Catalog) {}

  @Cached({ soft: '1m', key: (id: number) => `product:${id}` })
  async findOne(id: number): Promise<Product> {
    const product = await this.catalog.find(id);
    if (product === undefined) throw new NotFoundException(`No product ${id}`);
    return product;
  }
}
