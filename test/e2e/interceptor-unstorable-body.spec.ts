import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { Controller, Get, type INestApplication, type LoggerService, Module } from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import request from 'supertest';
import {
  CachedRoute,
  type HerdEvent,
  HerdGuardInterceptor,
  HerdGuardModule,
  HerdGuardService,
  SkipCache,
} from '../../lib/index.js';
import { ADAPTERS, startHttpApp } from '../helpers/nest-app.js';
import { Runs } from '../helpers/runs.js';

const AT = new Date(Date.UTC(2026, 0, 2, 3, 4, 5));

@Controller()
class ToolsController {
  constructor(private readonly runs: Runs) {}

  /** v8 (the default serializer) cannot store a function. */
  @Get('tool')
  tool(): { name: string; use: () => string; run: number } {
    return { name: 'hammer', use: () => 'bang', run: this.runs.next('tool') };
  }

  @Get('tool-uncached')
  @SkipCache()
  toolUncached(): { name: string; use: () => string; run: number } {
    return { name: 'hammer', use: () => 'bang', run: this.runs.next('tool-uncached') };
  }

  /** Strict JSON cannot store a Date (it would read back as a string). */
  @Get('dated')
  @CachedRoute({ serializer: 'json' })
  dated(): { at: Date; run: number } {
    return { at: AT, run: this.runs.next('dated') };
  }
}

/** Collects what the module logs at warn. */
class Warnings implements LoggerService {
  readonly lines: unknown[] = [];
  log(): void {}
  error(): void {}
  warn(message: unknown): void {
    this.lines.push(message);
  }
}

const warnings = new Warnings();

@Module({
  imports: [HerdGuardModule.forRoot({ logging: warnings })],
  controllers: [ToolsController],
  providers: [Runs, { provide: APP_INTERCEPTOR, useClass: HerdGuardInterceptor }],
})
class AppModule {}

describe.each(ADAPTERS)(
  'HerdGuardInterceptor passes a body it cannot store through on %s',
  (adapter) => {
    let app: INestApplication;
    let runs: Runs;
    let events: HerdEvent[];
    const http = () => request(app.getHttpServer());

    beforeEach(async () => {
      warnings.lines.length = 0;
      app = await startHttpApp(adapter, AppModule);
      runs = app.get(Runs);
      events = [];
      app.get(HerdGuardService).engine.onEvent((event) => events.push(event), { reads: false });
    });

    afterEach(async () => {
      await app.close();
    });

    it('answers a body with a function as the uncached route does, on every request', async () => {
      const uncached = await http().get('/tool-uncached');
      const answers = [
        await http().get('/tool'),
        await http().get('/tool'),
        await http().get('/tool'),
      ];
      expect(uncached.status).toBe(200);
      for (const [i, answer] of answers.entries()) {
        expect(answer.status).toBe(200);
        expect(answer.headers['content-type']).toBe(uncached.headers['content-type']);
        expect(answer.body).toEqual({ ...uncached.body, run: i + 1 });
        expect(answer.headers['x-cache']).toBeUndefined();
      }
      expect(runs.of('tool')).toBe(3);
    });

    it('answers a Date with the json serializer as Nest sends it, on every request', async () => {
      const first = await http().get('/dated');
      const second = await http().get('/dated');
      expect([first.status, second.status]).toEqual([200, 200]);
      expect([first.body, second.body]).toEqual([
        { at: AT.toISOString(), run: 1 },
        { at: AT.toISOString(), run: 2 },
      ]);
      expect(second.headers['x-cache']).toBeUndefined();
    });

    it('answers concurrent requests each with its own handler run', async () => {
      const answers = await Promise.all(Array.from({ length: 5 }, () => http().get('/tool')));
      expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200, 200, 200]);
      expect(answers.map((answer) => answer.body.run).sort()).toEqual([1, 2, 3, 4, 5]);
    });

    it('reports a refused body once for its key, not once per request', async () => {
      for (let i = 0; i < 4; i += 1) await http().get('/tool');
      const loads = events.filter((event) => event.type === 'load-failed');
      expect(loads).toHaveLength(1);
      expect(warnings.lines).toEqual([
        expect.objectContaining({ event: 'response not stored: the serializer refuses its body' }),
      ]);
    });
  },
);
