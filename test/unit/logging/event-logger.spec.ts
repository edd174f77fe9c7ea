import { describe, expect, it } from '@jest/globals';
import { ForbiddenException, type LoggerService, NotFoundException } from '@nestjs/common';
import {
  EventLogger,
  HerdEngine,
  MemoryStore,
  type Entry,
  type LeaseAttempt,
} from '../../../lib/index.js';
import { ManualClock } from '../../helpers/clock.js';
import { until } from '../../helpers/deferred.js';
import { memoryEngine } from '../../helpers/engine.js';

class RecordingLogger implements LoggerService {
  readonly lines: Array<{ level: string; message: unknown }> = [];
  log(message: unknown): void {
    this.lines.push({ level: 'log', message });
  }
  error(message: unknown): void {
    this.lines.push({ level: 'error', message });
  }
  warn(message: unknown): void {
    this.lines.push({ level: 'warn', message });
  }
  debug(message: unknown): void {
    this.lines.push({ level: 'debug', message });
  }
}

describe('EventLogger', () => {
  it('logs loads and lease results but never a line per hit', async () => {
    const engine = memoryEngine();
    const logger = new RecordingLogger();
    const events = new EventLogger(engine, logger);
    await engine.getOrLoad('k', async () => 'v');
    for (let i = 0; i < 100; i += 1) await engine.getOrLoad('k', async () => 'v');
    expect(logger.lines.map((line) => (line.message as { event: string }).event)).toEqual([
      'lease acquired',
      'loaded',
    ]);
    events.close();
  });

  it('says why a stale value was served', async () => {
    const clock = new ManualClock();
    const engine = new HerdEngine({
      now: clock.now,
      store: new MemoryStore({ now: clock.now }),
      policy: { soft: '1s', hard: '1h' },
    });
    const logger = new RecordingLogger();
    const events = new EventLogger(engine, logger);
    await engine.getOrLoad('k', async () => 'v');
    clock.advance(2_000);
    const result = await engine.read('k', async () => Promise.reject(new Error('db down')));
    await result.revalidated;
    const warnings = logger.lines
      .filter((line) => line.level === 'warn')
      .map((line) => line.message);
    expect(warnings).toEqual([
      expect.objectContaining({
        event: 'loader failed',
        key: 'k',
        error: 'db down',
        trigger: 'refresh',
      }),
      expect.objectContaining({ event: 'served stale', key: 'k', reason: 'loader-failed' }),
    ]);
    events.close();
  });

  it('logs a loader that answers with a client error at debug, and no stale value outlives the answer', async () => {
    const clock = new ManualClock();
    const engine = new HerdEngine({
      now: clock.now,
      store: new MemoryStore({ now: clock.now }),
      policy: { soft: '1s', hard: '1h' },
    });
    const logger = new RecordingLogger();
    const events = new EventLogger(engine, logger);
    await engine
      .getOrLoad('missing', async () => Promise.reject(new NotFoundException()))
      .catch(() => undefined);
    await engine.getOrLoad('k', async () => 'v');
    clock.advance(2_000);
    const result = await engine.read('k', async () => Promise.reject(new ForbiddenException()));
    await result.revalidated;
    expect(logger.lines.filter((line) => line.level === 'warn' || line.level === 'log')).toEqual(
      [],
    );
    expect(logger.lines.map((line) => line.message)).toContainEqual(
      expect.objectContaining({ event: 'loader answered uncached', key: 'missing', status: 404 }),
    );
    expect(logger.lines.map((line) => line.message)).not.toContainEqual(
      expect.objectContaining({ event: 'served stale', key: 'k' }),
    );
    await until(() => engine.activity().pendingStoreOps === 0);
    await expect(engine.peek('k')).resolves.toBeUndefined();
    events.close();
  });

  it('logs a failing store once per window, counting what it suppressed', async () => {
    class DownStore extends MemoryStore {
      override get(): never {
        throw new Error('connection refused');
      }
      override async acquireLease(): Promise<LeaseAttempt> {
        throw new Error('connection refused');
      }
      override async fill(_key: string, _entry: Entry): Promise<boolean> {
        throw new Error('connection refused');
      }
    }
    const clock = new ManualClock();
    const engine = new HerdEngine({ store: new DownStore() });
    const logger = new RecordingLogger();
    const events = new EventLogger(engine, logger, clock.now);
    for (let i = 0; i < 50; i += 1) await engine.getOrLoad(`k${i}`, async () => 'v');
    expect(logger.lines.filter((line) => line.level === 'error')).toHaveLength(3); // get, acquire-lease, fill
    clock.advance(10_000);
    await engine.getOrLoad('later', async () => 'v');
    const errors = logger.lines
      .filter((line) => line.level === 'error')
      .map((line) => line.message);
    expect(errors.at(-1)).toMatchObject({ operation: 'fill', suppressedSinceLast: 49 });
    events.close();
  });
});
