import { afterEach, describe, expect, it } from '@jest/globals';
import {
  ClassSerializerInterceptor,
  Controller,
  Get,
  type INestApplication,
  Module,
  Post,
  UseInterceptors,
} from '@nestjs/common';
import type { TransformerPackage } from '@nestjs/common/interfaces/external/transformer-package.interface.js';
import { APP_INTERCEPTOR, Reflector } from '@nestjs/core';
import request from 'supertest';
import { HerdGuardInterceptor, HerdGuardModule, SkipCache } from '../../lib/index.js';
import { ADAPTERS, startHttpApp } from '../helpers/nest-app.js';

const transformerPackage: TransformerPackage = {
  classToPlain: (value) => ({ ...(value as object), plain: true }) as Record<string, unknown>,
  plainToInstance: (type, plain) => Object.assign(Object.create(type.prototype as object), plain),
};
const serializer = () => new ClassSerializerInterceptor(new Reflector(), { transformerPackage });

@Controller('a')
class AController {
  @Get() get() {
    return { a: 1 };
  }
}

/** Skipped at class level: HerdGuard never caches it. */
@Controller('s')
@SkipCache()
@UseInterceptors(serializer(), HerdGuardInterceptor)
class SkippedController {
  @Get() get() {
    return { s: 1 };
  }
}

/** Only POST routes: HerdGuard never caches them. */
@Controller('p')
@UseInterceptors(serializer(), HerdGuardInterceptor)
class PostOnlyController {
  @Post() post() {
    return { p: 1 };
  }
}

const SER = { provide: APP_INTERCEPTOR, useValue: serializer() };
const HG = { provide: APP_INTERCEPTOR, useClass: HerdGuardInterceptor };

@Module({ imports: [HerdGuardModule.forRoot()], controllers: [AController], providers: [HG, SER] })
class CacheThenSerializer {}

@Module({ providers: [SER] })
class SerializerFeature {}
@Module({
  imports: [HerdGuardModule.forRoot(), SerializerFeature],
  controllers: [AController],
  providers: [HG],
})
class CacheInRootSerializerInFeature {}

@Module({ imports: [HerdGuardModule.forRoot()], controllers: [AController], providers: [SER] })
class NoCachedRouteGlobalSerializer {}

@Module({ imports: [HerdGuardModule.forRoot()], controllers: [AController], providers: [HG] })
class UseGlobalSerializerAfter {}

@Module({ imports: [HerdGuardModule.forRoot()], controllers: [SkippedController] })
class SkippedApp {}

@Module({ imports: [HerdGuardModule.forRoot()], controllers: [PostOnlyController] })
class PostOnlyApp {}

@Module({
  imports: [HerdGuardModule.forRoot(), HerdGuardModule.forRoot({ name: 'b' })],
  controllers: [AController],
  providers: [HG, SER],
})
class NamedCaches {}

@Module({
  imports: [HerdGuardModule.forRoot()],
  controllers: [AController],
  providers: [HerdGuardInterceptor],
})
class HgProvider {}

describe.each(ADAPTERS)('serializer order on %s', (adapter) => {
  let app: INestApplication | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  const starts = async (module: object, configure?: (a: INestApplication) => void) => {
    try {
      app = await startHttpApp(adapter, module as never, configure);
      return 'started';
    } catch (e) {
      return `failed: ${(e as Error).message.slice(0, 120)}`;
    }
  };

  it('starts with APP_INTERCEPTOR cache then serializer, one module', async () => {
    expect(await starts(CacheThenSerializer)).toBe('started');
    const r = await request(app!.getHttpServer()).get('/a');
    expect(r.text).toContain('plain');
  });
  it('starts with the cache global in the root module and the serializer in an imported one', async () => {
    expect(await starts(CacheInRootSerializerInFeature)).toBe('started');
  });
  it('starts with a global serializer and no cache interceptor bound', async () => {
    expect(await starts(NoCachedRouteGlobalSerializer)).toBe('started');
  });
  it('starts with useGlobalInterceptors(serializer) after a global cache', async () => {
    expect(
      await starts(UseGlobalSerializerAfter, (a) => a.useGlobalInterceptors(serializer())),
    ).toBe('started');
  });
  it('starts with a @SkipCache() controller binding its serializer before the cache', async () => {
    expect(await starts(SkippedApp)).toBe('started');
  });
  it('starts with a POST-only controller binding its serializer before the cache', async () => {
    expect(await starts(PostOnlyApp)).toBe('started');
  });
  it('rejects useGlobalInterceptors(serializer, cache): the serializer runs outside the cache', async () => {
    expect(
      await starts(HgProvider, (a) =>
        a.useGlobalInterceptors(serializer(), a.get(HerdGuardInterceptor)),
      ),
    ).toMatch(/^failed/);
  });
  it('starts with two named caches in the safe order', async () => {
    expect(await starts(NamedCaches)).toBe('started');
  });
});
