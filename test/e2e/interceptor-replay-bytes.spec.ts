import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  Controller,
  Get,
  Header,
  type INestApplication,
  Module,
  Param,
  UseInterceptors,
} from '@nestjs/common';
import request from 'supertest';
import {
  CachedRoute,
  HerdGuardInterceptor,
  HerdGuardModule,
  type HerdGuardModuleOptions,
  HerdGuardService,
  routeCacheKey,
} from '../../lib/index.js';
import { sleep } from '../helpers/deferred.js';
import { ADAPTERS, type AdapterName, startHttpApp } from '../helpers/nest-app.js';
import { RedisServer, stopAllRedisServers } from '../helpers/redis-server.js';

/** What a handler may return, by name: each is answered uncached, and cached on MISS, HIT, STALE. */
const BODIES = {
  object: () => ({ name: 'héllo', tags: ['a', 'b'] }),
  array: () => [1, 'x', null],
  string: () => 'héllo <b>wörld</b>',
  'empty-string': () => '',
  number: () => 42,
  boolean: () => false,
  null: () => null,
  undefined: () => undefined,
  buffer: () => Buffer.from([0, 1, 2, 250, 255]),
  uint8array: () => new Uint8Array([0, 1, 2, 250, 255]),
} satisfies Record<string, () => unknown>;
type Kind = keyof typeof BODIES;

/** Handlers that set headers about their body (those of `@Header` are set before the handler). */
const TYPED = ['csv', 'octets', 'counted'] as const;
const KINDS: readonly string[] = [...Object.keys(BODIES), ...TYPED];

@Controller('cached')
@UseInterceptors(HerdGuardInterceptor)
@CachedRoute({ tags: ['replay'] })
class CachedBodiesController {
  @Get('csv')
  @Header('Content-Type', 'text/csv')
  csv(): string {
    return 'a,b\n1,2\n';
  }

  @Get('octets')
  @Header('Content-Type', 'application/octet-stream')
  octets(): Buffer {
    return Buffer.from([9, 8, 7, 0, 255]);
  }

  @Get('counted')
  @Header('X-Total-Count', '2')
  counted(): number[] {
    return [1, 2];
  }

  /** Fastify cannot send a number with a Content-Type that is not JSON (it answers 500). */
  @Get('number-as-text')
  @Header('Content-Type', 'text/plain')
  numberAsText(): number {
    this.runs += 1;
    return 7;
  }

  runs = 0;

  @Get(':kind')
  body(@Param('kind') kind: string): unknown {
    return BODIES[kind as Kind]();
  }
}

/** The same handlers without the interceptor: what each answers uncached. */
@Controller('plain')
class PlainBodiesController {
  @Get('csv')
  @Header('Content-Type', 'text/csv')
  csv(): string {
    return 'a,b\n1,2\n';
  }

  @Get('octets')
  @Header('Content-Type', 'application/octet-stream')
  octets(): Buffer {
    return Buffer.from([9, 8, 7, 0, 255]);
  }

  @Get('counted')
  @Header('X-Total-Count', '2')
  counted(): number[] {
    return [1, 2];
  }

  @Get('number-as-text')
  @Header('Content-Type', 'text/plain')
  numberAsText(): number {
    return 7;
  }

  @Get(':kind')
  body(@Param('kind') kind: string): unknown {
    return BODIES[kind as Kind]();
  }
}

function appModule(options: HerdGuardModuleOptions) {
  @Module({
    imports: [HerdGuardModule.forRoot(options)],
    controllers: [CachedBodiesController, PlainBodiesController],
  })
  class AppModule {}
  return AppModule;
}

/** What a client receives, byte for byte, and how the cache answered. */
interface Answer {
  readonly status: number;
  readonly contentType: string | undefined;
  readonly totalCount: string | undefined;
  readonly body: string;
  readonly cache: string | undefined;
}

async function answer(app: INestApplication, path: string): Promise<Answer> {
  const response = await request(app.getHttpServer())
    .get(path)
    .buffer(true)
    .parse((res, done) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => done(null, Buffer.concat(chunks)));
    });
  return {
    status: response.status,
    contentType: response.headers['content-type'],
    totalCount: response.headers['x-total-count'],
    body: (response.body as Buffer).toString('hex'),
    cache: response.headers['x-cache'],
  };
}

/** The first answer that is a HIT (once a refresh has stored its entry). */
async function hitOf(app: INestApplication, path: string): Promise<Answer> {
  for (let tries = 0; tries < 200; tries += 1) {
    const hit = await answer(app, path);
    if (hit.cache === 'HIT') return hit;
    await sleep(10);
  }
  throw new Error(`no HIT for ${path}`);
}

/** The answer without `X-Cache`, to compare with the uncached one. */
function sent({ cache: _cache, ...rest }: Answer): Omit<Answer, 'cache'> {
  return rest;
}

afterAll(async () => {
  await stopAllRedisServers();
});

describe.each(ADAPTERS)(
  'HerdGuardInterceptor answers what the handler answers uncached on %s',
  (adapter) => {
    let app: INestApplication;
    const reads: Array<{ key: string; negative: boolean }> = [];

    beforeAll(async () => {
      app = await startHttpApp(
        adapter,
        appModule({ policy: { soft: '1h', hard: '2h', negativeTtl: '1h', jitter: 0 } }),
      );
      app.get(HerdGuardService).onEvent((event) => {
        if (event.type === 'read') reads.push({ key: event.key, negative: event.negative });
      });
    });

    afterAll(async () => {
      await app.close();
    });

    it.each(KINDS)('%s: on MISS, HIT, STALE and after the refresh', async (kind) => {
      const uncached = await answer(app, `/plain/${kind}`);
      const miss = await answer(app, `/cached/${kind}`);
      const hit = await answer(app, `/cached/${kind}`);
      await app.get(HerdGuardService).expireTag('replay');
      const stale = await answer(app, `/cached/${kind}`);
      // The refresh ran after the stale answer went out, on a response that held its headers.
      const refreshed = await hitOf(app, `/cached/${kind}`);
      expect([miss.cache, hit.cache, stale.cache]).toEqual(['MISS', 'HIT', 'STALE']);
      expect([miss, hit, stale, refreshed].map(sent)).toEqual(
        [uncached, uncached, uncached, uncached].map(sent),
      );
    });

    it('stores no body the platform answers with an error, and answers it as uncached', async () => {
      const uncached = await answer(app, '/plain/number-as-text');
      const first = await answer(app, '/cached/number-as-text');
      const second = await answer(app, '/cached/number-as-text');
      expect([first, second].map(sent)).toEqual([uncached, uncached].map(sent));
      const controller = app.get(CachedBodiesController);
      if (adapter === 'fastify') {
        expect(uncached.status).toBe(500);
        expect(controller.runs).toBe(2);
      } else {
        expect([first.cache, second.cache]).toEqual(['MISS', 'HIT']);
        expect(controller.runs).toBe(1);
      }
    });

    it.each(['null', 'undefined'])(
      'keeps a %s body a cached "not found" (negativeTtl)',
      async (kind) => {
        await answer(app, `/cached/${kind}?negative`);
        const hit = await answer(app, `/cached/${kind}?negative`);
        expect(hit.cache).toBe('HIT');
        expect(reads.filter((read) => read.key.endsWith(`/cached/${kind}?negative`))).toEqual([
          expect.objectContaining({ negative: true }),
          expect.objectContaining({ negative: true }),
        ]);
      },
    );

    it.each([
      ['a string', 'string', 'from the previous release'],
      ['an object', 'object', { name: 'from the previous release' }],
      ['a Buffer', 'buffer', Buffer.from([3, 2, 1])],
    ])(
      'replays %s stored by the previous release (the returned value) as the platform sends it',
      async (_what, kind, value) => {
        const herd = app.get(HerdGuardService);
        const key = routeCacheKey({
          method: 'GET',
          handler: 'CachedBodiesController.body',
          host: '127.0.0.1',
          url: `/cached/${kind}?previous`,
        });
        await herd.set(key, { status: 200, body: value });
        const replayed = await answer(app, `/cached/${kind}?previous`);
        const uncached = await answer(app, `/plain/${kind}`);
        expect(replayed.cache).toBe('HIT');
        expect(replayed.contentType).toBe(uncached.contentType);
        const expected =
          typeof value === 'string'
            ? Buffer.from(value)
            : Buffer.isBuffer(value) && adapter === 'fastify'
              ? value
              : Buffer.from(JSON.stringify(value));
        expect(replayed.body).toBe(expected.toString('hex'));
      },
    );
  },
);

describe('HerdGuardInterceptor on an Express pod and a Fastify pod sharing a namespace', () => {
  let server: RedisServer;
  const pods = new Map<AdapterName, INestApplication>();

  beforeAll(async () => {
    server = await RedisServer.start();
    const module = appModule({
      redis: server.url,
      namespace: 'replay-mixed',
      policy: { soft: '1h', hard: '2h', negativeTtl: '1h', jitter: 0 },
    });
    for (const adapter of ADAPTERS) pods.set(adapter, await startHttpApp(adapter, module));
  });

  afterAll(async () => {
    for (const pod of pods.values()) await pod.close();
  });

  const cases = ADAPTERS.flatMap((loader) =>
    KINDS.map((kind): [AdapterName, string] => [loader, kind]),
  ).filter(([loader, kind]) => !(loader === 'fastify' && kind === 'null'));

  it.each(cases)(
    'answers on every pod what the %s pod that loaded %s answers uncached',
    async (loader, kind) => {
      const loading = pods.get(loader)!;
      const other = pods.get(loader === 'express' ? 'fastify' : 'express')!;
      const path = `/cached/${kind}?loaded-by=${loader}`;
      const uncached = await answer(loading, `/plain/${kind}`);
      const miss = await answer(loading, path);
      const hit = await answer(other, path);
      await other.get(HerdGuardService).expireTag('replay');
      let stale = await answer(other, path);
      // (Should the pod's own invalidation reach its near copy late, ask again.)
      for (let tries = 0; stale.cache === 'HIT' && tries < 100; tries += 1) {
        await sleep(10);
        stale = await answer(other, path);
      }
      expect([miss.cache, hit.cache, stale.cache]).toEqual(['MISS', 'HIT', 'STALE']);
      expect([miss, hit, stale].map(sent)).toEqual([uncached, uncached, uncached].map(sent));
      // The stale answer's request refreshed the entry on the other pod: it is that pod's now
      // (but for Fastify's JSON null on Express, below).
      const refreshed = await hitOf(loading, path);
      if (kind !== 'null')
        expect(sent(refreshed)).toEqual(sent(await answer(other, `/plain/${kind}`)));
    },
  );

  it('answers a null "not found" loaded on Fastify with an empty body on Express, as Express answers any null', async () => {
    const path = '/cached/null?loaded-by=fastify';
    const loaded = await answer(pods.get('fastify')!, path);
    const elsewhere = await answer(pods.get('express')!, path);
    expect(loaded.body).toBe(Buffer.from('null').toString('hex'));
    expect(elsewhere.cache).toBe('HIT');
    expect(sent(elsewhere)).toEqual(sent(await answer(pods.get('express')!, '/plain/null')));
  });
});
