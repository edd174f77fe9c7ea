import { getEventListeners } from 'node:events';
import { describe, expect, it } from '@jest/globals';
import {
  HerdEngine,
  type LoadContext,
  LoaderTimeoutError,
  type LeaseAttempt,
  MemoryStore,
  UpstreamUnavailableError,
  WaitAbortedError,
  WaitTimeoutError,
} from '../../../lib/index.js';
import { counted } from '../../helpers/counted.js';
import { deferred, until } from '../../helpers/deferred.js';
import { engineWithClock, memoryEngine } from '../../helpers/engine.js';

describe('HerdEngine timeouts', () => {
  it('lets one caller time out and another abort while the rest get the value from a single load', async () => {
    const engine = memoryEngine();
    const gate = deferred<string>();
    const loader = counted(() => gate.promise);
    const controller = new AbortController();
    const patient = Array.from({ length: 10 }, () => engine.getOrLoad('k', loader));
    const timedOut = engine.getOrLoad('k', loader, { timeout: '5ms' });
    const aborted = engine.getOrLoad('k', loader, { signal: controller.signal });
    controller.abort();
    await expect(aborted).rejects.toBeInstanceOf(WaitAbortedError);
    await expect(timedOut).rejects.toBeInstanceOf(WaitTimeoutError);
    gate.resolve('v');
    await expect(Promise.all(patient)).resolves.toEqual(Array(10).fill('v'));
    expect(loader.calls).toBe(1);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });

  it('gives callers the stale value after loaderSoftTimeout and lets the load finish in the background', async () => {
    const { engine, clock } = engineWithClock({
      soft: '1s',
      hard: '1h',
      staleWhileRevalidate: false,
      loaderSoftTimeout: '20ms',
    });
    await engine.getOrLoad('k', () => 'old');
    clock.advance(2_000);
    const gate = deferred<string>();
    const loader = counted(() => gate.promise);
    await expect(engine.read('k', loader)).resolves.toMatchObject({ value: 'old', path: 'stale' });
    expect(engine.activity().inflight).toBe(1);
    gate.resolve('new');
    await until(() => engine.activity().inflight === 0);
    await expect(engine.read('k', loader)).resolves.toMatchObject({ value: 'new', path: 'fresh' });
    expect(loader.calls).toBe(1);
  });

  it('aborts the loader and fails the callers after loaderHardTimeout', async () => {
    const engine = memoryEngine({ policy: { loaderHardTimeout: '20ms' } });
    let signal: AbortSignal | undefined;
    const never = (context: LoadContext<string>): Promise<string> => {
      signal = context.signal;
      return new Promise(() => undefined);
    };
    await expect(engine.getOrLoad('k', never)).rejects.toBeInstanceOf(LoaderTimeoutError);
    expect(signal?.aborted).toBe(true);
    expect(engine.activity()).toMatchObject({ inflight: 0, loaders: 0 });
  });

  it('fails a follower with UpstreamUnavailableError after twice waitTimeout of holders that never fill, or loads when onWaitTimeout is load', async () => {
    // Every attempt finds a new holder (so none is ever stuck for waitTimeout), and none fills.
    class Relay extends MemoryStore {
      #version = 1;
      override async acquireLease(): Promise<LeaseAttempt> {
        return { lease: undefined, current: { entry: undefined, version: (this.#version += 1) } };
      }
    }
    const store = new Relay();
    const strict = new HerdEngine({ store, policy: { waitTimeout: '30ms' } });
    const failure = await strict.getOrLoad('k', () => 'x').catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(UpstreamUnavailableError);
    // Whole milliseconds, in the field and the message.
    const { waitedMs, message } = failure as UpstreamUnavailableError;
    expect(Number.isInteger(waitedMs) && waitedMs >= 60).toBe(true);
    expect(message).toContain(`after waiting ${waitedMs} ms`);
    const lenient = new HerdEngine({
      store,
      policy: { waitTimeout: '30ms', onWaitTimeout: 'load' },
    });
    const lenientLoader = counted((context: LoadContext<string>) =>
      context.fence === undefined ? 'unleased' : 'leased',
    );
    await expect(lenient.getOrLoad('k', lenientLoader)).resolves.toBe('unleased');
    expect(lenientLoader.calls).toBe(1);
  });
});
