import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { Controller, Get, type INestApplication, Module, UseInterceptors } from '@nestjs/common';
import request from 'supertest';
import {
  type AcquireOptions,
  HerdGuardInterceptor,
  HerdGuardModule,
  type LeaseAttempt,
  MemoryStore,
} from '../../lib/index.js';
import { ADAPTERS, startHttpApp } from '../helpers/nest-app.js';

/**
 * Another pod holds the key's lease and never fills it, and no lease can be taken over (its holder
 * is already a rescuer, say): after twice `waitTimeout` the engine gives up with
 * `UpstreamUnavailableError` (`onWaitTimeout: 'error'`, the default), which the interceptor
 * answers as 503, not as a bare 500. The handler never runs here.
 */
class LeaseHeldElsewhere extends MemoryStore {
  override async acquireLease(
    key: string,
    _ttlMs: number,
    _options?: AcquireOptions,
  ): Promise<LeaseAttempt> {
    return { lease: undefined, current: this.get(key) };
  }
}

let runs = 0;

@Controller('report')
class ReportController {
  @Get()
  @UseInterceptors(HerdGuardInterceptor)
  report(): { ok: boolean } {
    runs += 1;
    return { ok: true };
  }
}

@Module({
  imports: [
    HerdGuardModule.forRoot({
      store: new LeaseHeldElsewhere(),
      policy: { waitTimeout: '100ms', jitter: 0 },
    }),
  ],
  controllers: [ReportController],
})
class AppModule {}

describe.each(ADAPTERS)('HerdGuardInterceptor when no holder fills the key on %s', (adapter) => {
  let app: INestApplication;

  beforeEach(async () => {
    runs = 0;
    app = await startHttpApp(adapter, AppModule);
  });

  afterEach(async () => {
    await app.close();
  });

  it('answers 503 Service Unavailable once twice waitTimeout has passed', async () => {
    const response = await request(app.getHttpServer()).get('/report').set('Host', 'reports.test');
    expect(response.status).toBe(503);
    expect(response.body).toMatchObject({ statusCode: 503, message: 'Service Unavailable' });
    expect(runs).toBe(0);
  });
});
