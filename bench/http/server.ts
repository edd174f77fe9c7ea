/**
 * The HTTP side of S7, started in its own process (so autocannon and the app do not share a
 * CPU): the app of ./app.ts on a free port, told to the parent over IPC.
 */
import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { type BenchHttpConfig, BenchHttpModule } from './app.js';

const config = JSON.parse(process.argv[2] ?? '{}') as BenchHttpConfig;

const app = await NestFactory.create(BenchHttpModule.register(config), { logger: false });
await app.listen(0, '127.0.0.1');
const { port } = app.getHttpServer().address() as { port: number };
process.send?.({ port });
process.on('message', (message: unknown) => {
  if (message === 'stop') void app.close().then(() => process.exit(0));
});
