import { afterEach, describe, expect, it } from '@jest/globals';
import {
  type CallHandler,
  Controller,
  type ExecutionContext,
  Get,
  type INestApplication,
  Injectable,
  Module,
  type NestInterceptor,
  UseInterceptors,
} from '@nestjs/common';
import { map } from 'rxjs';
import request from 'supertest';
import { CachedRoute, HerdGuardInterceptor, HerdGuardModule } from '../../lib/index.js';
import { ADAPTERS, startHttpApp } from '../helpers/nest-app.js';

let runs = 0;
let throwing = true;

class Label {
  constructor(readonly v: string) {}
  toJSON(): string {
    return this.v;
  }
}
class Nothing {
  readonly secret = 'field';
  toJSON(): undefined {
    return undefined;
  }
}
class Boom {
  toJSON(): never {
    if (throwing) throw new Error('boom');
    return { ok: true } as never;
  }
}

/** The common "wrap every response" interceptor, outside the cache. */
@Injectable()
class Wrap implements NestInterceptor {
  intercept(_c: ExecutionContext, next: CallHandler) {
    return next.handle().pipe(map((data: unknown) => ({ data })));
  }
}

@Controller()
@UseInterceptors(Wrap)
class C {
  @Get('label')
  @UseInterceptors(HerdGuardInterceptor)
  @CachedRoute({})
  label() {
    runs++;
    return new Label('hello');
  }
  @Get('label-raw')
  labelRaw() {
    return new Label('hello');
  }
}

@Controller()
class D {
  @Get('nothing')
  @UseInterceptors(HerdGuardInterceptor)
  nothing() {
    runs++;
    return new Nothing();
  }
  @Get('nothing-raw')
  nothingRaw() {
    return new Nothing();
  }
  @Get('boom')
  @UseInterceptors(HerdGuardInterceptor)
  boom() {
    runs++;
    return new Boom();
  }
}

@Module({ imports: [HerdGuardModule.forRoot()], controllers: [C, D] })
class AppModule {}

describe.each(ADAPTERS)('toJSON() bodies on %s', (adapter) => {
  let app: INestApplication;
  afterEach(async () => {
    await app.close();
    runs = 0;
    throwing = true;
  });

  it('outer interceptor sees the same value for a toJSON() returning a primitive', async () => {
    app = await startHttpApp(adapter, AppModule);
    const raw = await request(app.getHttpServer()).get('/label-raw');
    const miss = await request(app.getHttpServer()).get('/label');
    const hit = await request(app.getHttpServer()).get('/label');
    expect(miss.text).toBe(raw.text);
    expect(hit.text).toBe(raw.text);
  });

  it('a toJSON() returning undefined answers as uncached', async () => {
    app = await startHttpApp(adapter, AppModule);
    const raw = await request(app.getHttpServer()).get('/nothing-raw');
    const miss = await request(app.getHttpServer()).get('/nothing');
    const hit = await request(app.getHttpServer()).get('/nothing');
    expect(miss.text).toBe(raw.text);
    expect(hit.text).toBe(raw.text);
  });

  it('a throwing toJSON(): each request runs its handler as uncached, and it recovers', async () => {
    app = await startHttpApp(adapter, AppModule);
    const a = await request(app.getHttpServer()).get('/boom');
    const b = await request(app.getHttpServer()).get('/boom');
    throwing = false;
    const c = await request(app.getHttpServer()).get('/boom');
    expect([a.status, b.status]).toEqual([500, 500]);
    expect(c.status).toBe(200);
    expect(runs).toBe(3);
  });
});
