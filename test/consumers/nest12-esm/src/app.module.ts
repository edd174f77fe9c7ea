import { Module } from '@nestjs/common';
import { HerdGuardModule } from 'herd-guard';
import { Catalog } from './catalog.js';
import { ProductsController } from './products.controller.js';
import { ProductsService } from './products.service.js';

@Module({
  imports: [HerdGuardModule.forRoot({ isGlobal: true, policy: { soft: '30s' } })],
  controllers: [ProductsController],
  providers: [Catalog, ProductsService],
})
export class AppModule {}
