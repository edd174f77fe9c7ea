import 'reflect-metadata';
import { Controller, Get, Module, Param } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { HerdEngine } from '../lib/index.js';

const engine = new HerdEngine({ policy: { soft: '5s', hard: '1m' } });

@Controller()
class AppController {
  @Get('health')
  health(): { status: string } {
    return { status: 'ok' };
  }

  @Get('products/:id')
  product(@Param('id') id: string): Promise<{ id: string; loadedAt: string }> {
    return engine.getOrLoad(`product:${id}`, async () => {
      await new Promise((resolve) => setTimeout(resolve, 200));
      return { id, loadedAt: new Date().toISOString() };
    });
  }
}

@Module({ controllers: [AppController] })
class AppModule {}

const app = await NestFactory.create(AppModule);
app.enableShutdownHooks();
const port = Number(process.env['PORT'] ?? 3000);
await app.listen(port, '127.0.0.1');
console.log(`herd-guard sample listening on http://127.0.0.1:${port}`);
