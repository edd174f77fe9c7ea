import { Module } from '@nestjs/common';
import { HerdGuardModule } from 'herd-guard';
import { Catalog } from './catalog';
import { ProductsController } from './products.controller';
import { ProductsService } from './products.service';

@Module({
  imports: [HerdGuardModule.forRoot({ isGlobal: true, policy: { soft: '30s' } })],
  controllers: [ProductsController],
  providers: [Catalog, ProductsService],
})
export class AppModule {}
