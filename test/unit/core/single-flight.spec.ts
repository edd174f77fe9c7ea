import { getEventListeners } from 'node:events';
import { describe, expect, it } from '@jest/globals';
import { SingleFlight, WaitAbortedError, WaitTimeoutError } from '../../../lib/index.js';
import { activeTimers, deferred, flush, until } from '../../helpers/deferred.js';

describe('SingleFlight', () => {
  it('runs fn once for 1,000 concurrent callers and gives every caller the value', async () => {
    const flight = new SingleFlight();
    const gate = deferred<string>();
    let runs = 0;
    const calls = Array.from({ length: 1_000 }, () =>
      flight.do('k', () => {
        runs += 1;
        return gate.promise;
      }),
    );
    gate.resolve('v');
    const results = await Promise.all(calls);
    expect(runs).toBe(1);
    expect(results.every((r) => r.value === 'v')).toBe(true);
    expect(results.filter((r) => !r.shared)).toHaveLength(1);
    expect(flight.size).toBe(0);
  });

  it('gives every caller the same error and runs again on the next call', async () => {
    const flight = new SingleFlight();
    const gate = deferred<string>();
    let runs = 0;
    const fn = (): Promise<string> => {
      runs += 1;
      return gate.promise;
    };
    const calls = Array.from({ length: 100 }, () =>
      flight.do('k', fn).catch((error: unknown) => error),
    );
    const boom = new Error('boom');
    gate.reject(boom);
    const errors = await Promise.all(calls);
    expect(errors.every((e) => e === boom)).toBe(true);
    expect(flight.size).toBe(0);
    await expect(flight.do('k', () => 'again')).resolves.toEqual({ value: 'again', shared: false });
    expect(runs).toBe(1);
  });

  it('removes the entry when fn throws synchronously', async () => {
    const flight = new SingleFlight();
    await expect(
      flight.do('k', () => {
        throw new Error('sync');
      }),
    ).rejects.toThrow('sync');
    expect(flight.size).toBe(0);
    expect(flight.has('k')).toBe(false);
  });

  it('lets a waiter time out with its own error while the others get the value from one run', async () => {
    const flight = new SingleFlight();
    const gate = deferred<string>();
    let runs = 0;
    const fn = (): Promise<string> => {
      runs += 1;
      return gate.promise;
    };
    const patient = flight.do('k', fn);
    const impatient = flight.do('k', fn, { timeoutMs: 5 });
    await expect(impatient).rejects.toBeInstanceOf(WaitTimeoutError);
    expect(flight.has('k')).toBe(true);
    gate.resolve('v');
    await expect(patient).resolves.toEqual({ value: 'v', shared: false });
    expect(runs).toBe(1);
    expect(flight.armedWaits).toBe(0);
  });

  it('lets an aborted waiter leave without cancelling the run for the others', async () => {
    const flight = new SingleFlight();
    const gate = deferred<string>();
    const controller = new AbortController();
    const first = flight.do('k', () => gate.promise);
    const aborted = flight.do('k', () => gate.promise, { signal: controller.signal });
    controller.abort(new Error('client went away'));
    await expect(aborted).rejects.toBeInstanceOf(WaitAbortedError);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    gate.resolve('v');
    await expect(first).resolves.toMatchObject({ value: 'v' });
  });

  it('rejects at once for a signal that is already aborted, arming nothing', async () => {
    const flight = new SingleFlight();
    const gate = deferred<string>();
    const running = flight.do('k', () => gate.promise);
    await expect(
      flight.do('k', () => gate.promise, { signal: AbortSignal.abort() }),
    ).rejects.toBeInstanceOf(WaitAbortedError);
    expect(flight.armedWaits).toBe(0);
    gate.resolve('v');
    await running;
  });

  it('after forget, a late finisher does not remove the newer run', async () => {
    const flight = new SingleFlight();
    const old = deferred<string>();
    const fresh = deferred<string>();
    const first = flight.do('k', () => old.promise);
    flight.forget('k');
    const second = flight.do('k', () => fresh.promise);
    old.resolve('old');
    await first;
    expect(flight.has('k')).toBe(true);
    const joined = flight.do('k', () => Promise.resolve('unused'));
    fresh.resolve('new');
    await expect(second).resolves.toEqual({ value: 'new', shared: false });
    await expect(joined).resolves.toEqual({ value: 'new', shared: true });
  });

  it('leaves no entry, timer or listener after 10,000 random calls', async () => {
    const flight = new SingleFlight();
    const timersBefore = activeTimers();
    const signals: AbortSignal[] = [];
    let seed = 42;
    const random = (): number => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed / 2_147_483_648;
    };
    const calls: Promise<unknown>[] = [];
    for (let i = 0; i < 10_000; i += 1) {
      const key = `k${Math.floor(random() * 25)}`;
      const roll = random();
      const fn = (): Promise<string> | string => {
        if (roll < 0.1) throw new Error('sync');
        if (roll < 0.3) return Promise.reject(new Error('async'));
        if (roll < 0.6)
          return new Promise((resolve) =>
            setTimeout(() => resolve('slow'), Math.floor(random() * 4)),
          );
        return 'fast';
      };
      const controller = new AbortController();
      signals.push(controller.signal);
      const options =
        random() < 0.3
          ? { timeoutMs: Math.floor(random() * 3) }
          : random() < 0.5
            ? { signal: controller.signal }
            : undefined;
      calls.push(flight.do(key, fn, options).catch(() => undefined));
      if (random() < 0.2) controller.abort();
      if (i % 500 === 0) await flush();
    }
    await Promise.all(calls);
    // Callers that gave up early may settle before the slow runs they left behind.
    await until(
      () => flight.size === 0 && activeTimers() <= timersBefore,
      5_000,
      'the runs to finish',
    );
    expect(flight.size).toBe(0);
    expect(flight.armedWaits).toBe(0);
    expect(activeTimers()).toBeLessThanOrEqual(timersBefore);
    expect(
      signals.reduce((sum, signal) => sum + getEventListeners(signal, 'abort').length, 0),
    ).toBe(0);
  });
});
