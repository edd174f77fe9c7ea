import type {
  DynamicModule,
  INestApplication,
  INestApplicationContext,
  Type,
} from '@nestjs/common';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';

export type AdapterName = 'express' | 'fastify';
export const ADAPTERS: readonly AdapterName[] = ['express', 'fastify'];

/**
 * A real Nest HTTP application for `module` on `adapter`, listening on a free loopback port (so
 * supertest reuses one server for concurrent requests). `configure` runs before init (versioning,
 * global pipes). Close it with `app.close()`.
 */
export async function startHttpApp(
  adapter: AdapterName,
  module: Type | DynamicModule,
  configure: (app: INestApplication) => void = () => undefined,
): Promise<INestApplication> {
  const moduleRef = await Test.createTestingModule({ imports: [module] }).compile();
  if (adapter === 'express') {
    const app = moduleRef.createNestApplication(new ExpressAdapter(), { logger: false });
    configure(app);
    await app.listen(0, '127.0.0.1');
    return app;
  }
  const app = moduleRef.createNestApplication<NestFastifyApplication>(new FastifyAdapter(), {
    logger: false,
  });
  configure(app);
  await app.init();
  await app.getHttpAdapter().getInstance().ready();
  await app.listen(0, '127.0.0.1');
  return app;
}

/**
 * A Nest HTTP application for `module` on `adapter` as the e2e test of `nest new` makes it:
 * initialised, not listening, so supertest on `app.getHttpServer()` listens on a new ephemeral port
 * for every request. Close it with `app.close()`.
 */
export async function initHttpApp(
  adapter: AdapterName,
  module: Type | DynamicModule,
): Promise<INestApplication> {
  const moduleRef = await Test.createTestingModule({ imports: [module] }).compile();
  if (adapter === 'express') {
    const app = moduleRef.createNestApplication(new ExpressAdapter(), { logger: false });
    await app.init();
    return app;
  }
  const app = moduleRef.createNestApplication<NestFastifyApplication>(new FastifyAdapter(), {
    logger: false,
  });
  await app.init();
  await app.getHttpAdapter().getInstance().ready();
  return app;
}

/** A Nest application context (no HTTP) for `module`, initialised; close it with `context.close()`. */
export async function startContext(module: Type | DynamicModule): Promise<INestApplicationContext> {
  const moduleRef = await Test.createTestingModule({ imports: [module] }).compile();
  moduleRef.useLogger(false);
  return moduleRef.init();
}
