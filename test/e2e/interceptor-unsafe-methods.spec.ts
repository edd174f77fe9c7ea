import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import {
  BadRequestException,
  Controller,
  Delete,
  Get,
  Header,
  Headers,
  Injectable,
  type INestApplication,
  Module,
  Param,
  Patch,
  Post,
  Put,
  Query,
  Redirect,
  Res,
  UseInterceptors,
} from '@nestjs/common';
import request from 'supertest';
import { CachedRoute, HerdGuardInterceptor, HerdGuardModule } from '../../lib/index.js';
import { ADAPTERS, startHttpApp } from '../helpers/nest-app.js';

/** Counts handler runs per route, per application. */
@Injectable()
class Runs {
  readonly #runs = new Map<string, number>();

  next(route: string): number {
    const runs = (this.#runs.get(route) ?? 0) + 1;
    this.#runs.set(route, runs);
    return runs;
  }
}

/** A response whose status the handler sets itself (`@Res({ passthrough: true })`). */
type StatusResponse = { status(code: number): unknown };

@Controller('notes')
@UseInterceptors(HerdGuardInterceptor)
@CachedRoute({ vary: ['accept-language'] })
class NotesController {
  constructor(private readonly runs: Runs) {}

  @Get()
  list(
    @Query('page') page?: string,
    @Headers('accept-language') language?: string,
  ): { page: string; language: string; run: number } {
    return { page: page ?? '1', language: language ?? '', run: this.runs.next('list') };
  }

  @Get(':id')
  one(@Param('id') id: string): { id: string; run: number } {
    return { id, run: this.runs.next(`one ${id}`) };
  }

  @Post()
  create(): { created: true } {
    return { created: true };
  }

  @Post('invalid')
  invalid(): never {
    throw new BadRequestException('no title');
  }

  @Post('refused')
  refused(@Res({ passthrough: true }) response: StatusResponse): { saved: false } {
    response.status(409);
    return { saved: false };
  }

  @Put(':id')
  replace(): { replaced: true } {
    return { replaced: true };
  }

  @Patch(':id')
  @Header('Location', '/notes')
  edit(): { edited: true } {
    return { edited: true };
  }

  @Delete(':id')
  @Header('Content-Location', 'http://elsewhere.test/notes')
  remove(): { removed: true } {
    return { removed: true };
  }

  @Post('moved')
  @Redirect('/notes', 303)
  moved(@Query('to') to?: string): { url: string } | undefined {
    return to === undefined ? undefined : { url: to };
  }

  @Post('archive')
  @CachedRoute({ invalidateOnWrite: false })
  archive(): { archived: true } {
    return { archived: true };
  }
}

/** A second route on the path of `/notes/archive`: the opt-out leaves its entries alone. */
@Controller('notes')
@UseInterceptors(HerdGuardInterceptor)
class ArchiveController {
  constructor(private readonly runs: Runs) {}

  @Get('archive')
  archived(): { run: number } {
    return { run: this.runs.next('archive') };
  }
}

@Module({
  imports: [HerdGuardModule.forRoot({ policy: { soft: '30s', hard: '5m', jitter: 0 } })],
  controllers: [ArchiveController, NotesController],
  providers: [Runs],
})
class AppModule {}

describe.each(ADAPTERS)('HerdGuardInterceptor on %s, for unsafe methods', (adapter) => {
  let app: INestApplication;
  const http = () => request(app.getHttpServer());

  beforeEach(async () => {
    app = await startHttpApp(adapter, AppModule);
  });

  afterEach(async () => {
    await app.close();
  });

  /** GETs `url` twice, so its entry is stored and served; resolves the cached body. */
  async function cache(url: string, language = 'en'): Promise<unknown> {
    const miss = await http().get(url).set('accept-language', language).expect(200);
    expect(miss.headers['x-cache']).toBe('MISS');
    const hit = await http().get(url).set('accept-language', language).expect(200);
    expect(hit.headers['x-cache']).toBe('HIT');
    return hit.body;
  }

  async function xCache(url: string, language = 'en'): Promise<string | undefined> {
    const response = await http().get(url).set('accept-language', language).expect(200);
    return response.headers['x-cache'];
  }

  it('makes the next GET of the path a MISS after a 2xx POST, whatever its query or Vary', async () => {
    await cache('/notes');
    await cache('/notes?page=2');
    await cache('/notes', 'de');
    await http().post('/notes').expect(201);
    expect(await xCache('/notes')).toBe('MISS');
    expect(await xCache('/notes?page=2')).toBe('MISS');
    const german = await http().get('/notes').set('accept-language', 'de').expect(200);
    expect(german.headers['x-cache']).toBe('MISS');
    expect(german.body).toEqual({ page: '1', language: 'de', run: 6 });
  });

  it('invalidates only the path written: a PUT on /notes/1 leaves /notes and /notes/2 cached', async () => {
    await cache('/notes');
    await cache('/notes/1');
    await cache('/notes/2');
    await http().put('/notes/1').expect(200);
    expect(await xCache('/notes/1')).toBe('MISS');
    expect(await xCache('/notes')).toBe('HIT');
    expect(await xCache('/notes/2')).toBe('HIT');
  });

  it('invalidates the same-origin Location of a PATCH as well as its path', async () => {
    await cache('/notes');
    await cache('/notes/1');
    await http().patch('/notes/1').expect(200);
    expect(await xCache('/notes/1')).toBe('MISS');
    expect(await xCache('/notes')).toBe('MISS');
  });

  it('invalidates the path a @Redirect() sends the writer to, by the decorator or the returned url', async () => {
    await cache('/notes');
    await cache('/notes/2');
    await http().post('/notes/moved').expect(303);
    expect(await xCache('/notes')).toBe('MISS');
    expect(await xCache('/notes/2')).toBe('HIT');
    await http().post('/notes/moved?to=/notes/2').expect(303);
    expect(await xCache('/notes/2')).toBe('MISS');
    expect(await xCache('/notes')).toBe('HIT');
  });

  it('leaves a Content-Location of another origin alone on a DELETE', async () => {
    await cache('/notes');
    await cache('/notes/1');
    await http().delete('/notes/1').expect(200);
    expect(await xCache('/notes/1')).toBe('MISS');
    expect(await xCache('/notes')).toBe('HIT');
  });

  it('invalidates nothing when the write fails with a 4xx thrown or set by the handler', async () => {
    await cache('/notes/invalid');
    await cache('/notes/refused');
    await http().post('/notes/invalid').expect(400);
    await http().post('/notes/refused').expect(409);
    expect(await xCache('/notes/invalid')).toBe('HIT');
    expect(await xCache('/notes/refused')).toBe('HIT');
  });

  it('keeps the entries of a path whose write handler opts out with invalidateOnWrite: false', async () => {
    await cache('/notes/archive');
    await http().post('/notes/archive').expect(201);
    expect(await xCache('/notes/archive')).toBe('HIT');
  });
});
