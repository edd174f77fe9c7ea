import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  Controller,
  Get,
  Header,
  type INestApplication,
  Injectable,
  Module,
  UseInterceptors,
} from '@nestjs/common';
import { types } from 'node:util';
import request from 'supertest';
import {
  Cached,
  HerdEngine,
  HerdGuardInterceptor,
  HerdGuardModule,
  type HerdGuardModuleOptions,
  MemoryStore,
} from '../../lib/index.js';
import { ADAPTERS, startHttpApp } from '../helpers/nest-app.js';
import { RedisServer, stopAllRedisServers } from '../helpers/redis-server.js';

class Money {
  constructor(readonly cents: number) {}
}

/** Everything JSON would change. */
function rich() {
  return {
    at: new Date(Date.UTC(2026, 0, 2, 3, 4, 5)),
    bytes: Buffer.from('héllo'),
    counts: new Map([['a', 1]]),
    ids: new Set([1, 2]),
    big: 12_345_678_901_234_567_890n,
    missing: undefined,
    price: new Money(999),
  };
}

@Injectable()
class Reports {
  loads = 0;

  @Cached({ key: () => 'report', soft: '1h' })
  async report(): Promise<ReturnType<typeof rich>> {
    this.loads += 1;
    return rich();
  }

  @Cached({ key: () => 'strict', soft: '1h', serializer: 'json' })
  async strict(): Promise<{ at: Date }> {
    return { at: new Date() };
  }
}

@Controller('files')
@UseInterceptors(HerdGuardInterceptor)
class FilesController {
  @Get('logo')
  @Header('Content-Type', 'application/octet-stream')
  logo(): Buffer {
    return Buffer.from([0, 1, 2, 250, 255]);
  }
}

function appModule(options: HerdGuardModuleOptions) {
  @Module({
    imports: [HerdGuardModule.forRoot(options)],
    controllers: [FilesController],
    providers: [Reports],
  })
  class AppModule {}
  return AppModule;
}

let server: RedisServer;

beforeAll(async () => {
  server = await RedisServer.start();
});

afterAll(async () => {
  await stopAllRedisServers();
});

describe.each(ADAPTERS)('values round-trip identically on every pod (%s)', (adapter) => {
  let pods: INestApplication[] = [];

  beforeAll(async () => {
    const module = appModule({ redis: server.url, namespace: `serialize-${adapter}` });
    pods = [await startHttpApp(adapter, module), await startHttpApp(adapter, module)];
  });

  afterAll(async () => {
    for (const pod of pods) await pod.close();
  });

  it('gives the loading pod and the other pod the same Date, Buffer, Map, Set, BigInt and undefined', async () => {
    const [loader, other] = pods as [INestApplication, INestApplication];
    const loaded = await loader.get(Reports).report();
    const again = await loader.get(Reports).report();
    const elsewhere = await other.get(Reports).report();
    expect(loader.get(Reports).loads + other.get(Reports).loads).toBe(1);
    for (const value of [loaded, again, elsewhere]) {
      // (Checked by kind, not instanceof: Jest runs tests in a realm of their own.)
      expect(types.isDate(value.at)).toBe(true);
      expect(value.at.toISOString()).toBe('2026-01-02T03:04:05.000Z');
      expect(Buffer.isBuffer(value.bytes)).toBe(true);
      expect(value.bytes.toString()).toBe('héllo');
      expect(types.isMap(value.counts) && [...value.counts]).toEqual([['a', 1]]);
      expect(types.isSet(value.ids) && [...value.ids]).toEqual([1, 2]);
      expect(value.big).toBe(12_345_678_901_234_567_890n);
      expect('missing' in value).toBe(true);
      // A class instance comes back as a plain object with its fields, on the loading pod too.
      expect(value.price).toEqual({ cents: 999 });
      expect(value.price).not.toBeInstanceOf(Money);
    }
  });

  it('serves a Buffer body from a pod that did not load it exactly as the loading pod did', async () => {
    const [loader, other] = pods as [INestApplication, INestApplication];
    // Each pod listens on a port of its own; keys name the host name, so they share entries.
    const logo = (pod: INestApplication) =>
      request(pod.getHttpServer()).get('/files/logo').buffer(true);
    const first = await logo(loader);
    const second = await logo(other);
    expect(first.headers['x-cache']).toBe('MISS');
    expect(second.headers['x-cache']).toBe('HIT');
    expect(second.headers['content-type']).toBe(first.headers['content-type']);
    expect(Buffer.from(second.body as Buffer)).toEqual(Buffer.from(first.body as Buffer));
    // Fastify sends a Buffer as its bytes (Nest on Express sends any object, a Buffer too, as JSON).
    if (adapter === 'fastify')
      expect(Buffer.from(second.body as Buffer)).toEqual(Buffer.from([0, 1, 2, 250, 255]));
  });

  it('refuses, at write time and naming where, a value strict JSON would change', async () => {
    await expect(pods[0]!.get(Reports).strict()).rejects.toMatchObject({
      code: 'HERD_GUARD_SERIALIZATION',
      key: 'strict',
      path: '$.at',
    });
  });
});

describe('values on the memory store', () => {
  it('gives the loading caller the stored copy, as every later caller gets it', async () => {
    const engine = new HerdEngine({ store: new MemoryStore() });
    const original = rich();
    const loaded = await engine.getOrLoad('k', () => original);
    expect(loaded).not.toBe(original);
    expect(loaded.price).not.toBeInstanceOf(Money);
    await expect(engine.getOrLoad('k', () => rich())).resolves.toBe(loaded);
  });
});
