import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import {
  ConfigurationError,
  type HerdEngine,
  HerdGuardService,
  type LoadContext,
} from '../../lib/index.js';
import { deferred, until } from '../helpers/deferred.js';
import type { ClusterSpec, EngineCluster } from './invalidation.scenarios.js';

/**
 * Edges of the invalidation model that the main scenarios leave out, run against each store:
 * dependency cycles entered from two sides at once, what a fenced load's loader is told, and
 * warming from several pods at once.
 */
export function describeInvalidationEdges(
  name: string,
  start: (spec: ClusterSpec) => Promise<EngineCluster>,
): void {
  describe(`${name}: invalidation edges`, () => {
    let cluster: EngineCluster | undefined;
    const launch = async (spec: ClusterSpec): Promise<readonly HerdEngine[]> => {
      cluster = await start(spec);
      return cluster.engines;
    };

    beforeEach(() => {
      cluster = undefined;
    });

    afterEach(async () => {
      await cluster?.close();
    });

    it('rejects a dependency cycle entered from both of its keys at once with ConfigurationError, not a loader timeout', async () => {
      // The hard timeout is the only other way out of the cycle: the test fails on it instead of hanging.
      const [engine] = await launch({ count: 1, policy: { soft: '1h', loaderHardTimeout: '2s' } });
      const inA = deferred();
      const inB = deferred();
      // a's value is built from b's and b's from a's: a programming error the cache says it reports.
      const a = engine!.getOrLoad('a', async () => {
        inA.resolve();
        await inB.promise;
        return `a(${await engine!.getOrLoad('b', () => 'b0')})`;
      });
      const b = engine!.getOrLoad('b', async () => {
        inB.resolve();
        await inA.promise;
        return `b(${await engine!.getOrLoad('a', () => 'a0')})`;
      });
      const outcomes = await Promise.allSettled([a, b]);
      const reasons = outcomes.map((outcome) =>
        outcome.status === 'rejected' ? outcome.reason : outcome.value,
      );
      expect(reasons.some((reason) => reason instanceof ConfigurationError)).toBe(true);
      expect(reasons.map((reason) => (reason as Error).name)).not.toContain('LoaderTimeoutError');
    });

    it('fires the signal of a background refresh whose load an invalidation fenced (nobody waits for its value)', async () => {
      // A short lease, so a keep-alive would notice a revoked lease quickly.
      const [engine] = await launch({ count: 1, policy: { soft: '1h', leaseTtl: '300ms' } });
      await engine!.getOrLoad('k', () => 'v1');
      await engine!.expire('k');
      const gate = deferred<string>();
      let signal: AbortSignal | undefined;
      const stale = await engine!.read('k', (context: LoadContext<string>) => {
        signal = context.signal;
        return gate.promise;
      });
      expect(stale).toMatchObject({ value: 'v1', path: 'stale' });
      await until(() => signal !== undefined, 5_000, 'the background refresh to start');
      // The refresh reads the old row; the update lands and is announced: its value will not be stored.
      await engine!.delete('k');
      try {
        // LoadContext.signal: "Fires when the loader passes loaderHardTimeout, the cache shuts down,
        // or the load is fenced."
        await until(() => signal!.aborted, 3_000, 'the fenced refresh to be aborted');
      } finally {
        gate.resolve('v1-old');
      }
    });

    it('loads a key once when two pods warm it at the same time (warm-up in onApplicationBootstrap on every pod)', async () => {
      const engines = await launch({ count: 2, policy: { soft: '1h' } });
      const services = engines.map((engine) => new HerdGuardService(engine));
      const gate = deferred();
      let loads = 0;
      const loader = async (): Promise<string> => {
        loads += 1;
        await gate.promise;
        return 'warm';
      };
      const first = services[0]!.warm([{ key: 'k', loader }]);
      await until(() => loads === 1, 5_000, 'the first pod to start loading');
      // The second pod's first lease attempt answers while the first pod's load still runs.
      const attempted = new Promise<void>((resolve) => {
        engines[1]!.onEvent((event) => {
          if (event.type === 'lease-acquired' || event.type === 'lease-contended') resolve();
        });
      });
      const second = services[1]!.warm([{ key: 'k', loader }]);
      await attempted;
      gate.resolve();
      await expect(first).resolves.toEqual({ warmed: 1, failed: [] });
      await expect(second).resolves.toEqual({ warmed: 1, failed: [] });
      expect(loads).toBe(1);
    });

    it('takes a slow load over at most once, not again every waitTimeout: the last load is the one stored', async () => {
      // Loads are slower than waitTimeout (well within loaderHardTimeout): the first owner is taken as stuck.
      const engines = await launch({
        count: 3,
        policy: { soft: '1h', waitTimeout: '100ms', leaseTtl: '100ms' },
      });
      const gates = [deferred<string>(), deferred<string>(), deferred<string>()];
      let loads = 0;
      const loader = (): Promise<string> => gates[Math.min((loads += 1), 3) - 1]!.promise;
      const settled = [false, false, false];
      const readOn = (pod: number): Promise<unknown> =>
        engines[pod]!.read('k', loader).then(
          (result) => {
            settled[pod] = true;
            return result;
          },
          (error: unknown) => {
            settled[pod] = true;
            return error;
          },
        );
      const first = readOn(0);
      await until(() => loads === 1, 5_000, 'the first load');
      // A follower on the second pod waits waitTimeout, then may take the lease over (README: one caller wins).
      const second = readOn(1);
      await until(
        () => loads === 2 || settled[1]!,
        5_000,
        'the second caller to take over or settle',
      );
      const loadsBefore = loads;
      // A follower on the third pod: "the others wait for it".
      const third = readOn(2);
      try {
        await until(
          () => settled[2]! || loads > loadsBefore,
          5_000,
          'the third caller to settle or load',
        );
        expect(loads).toBe(loadsBefore);
      } finally {
        gates.forEach((gate, i) => gate.resolve(`v${i + 1}`));
        await Promise.all([first, second, third]);
      }
      // The last load was not fenced by yet another takeover: its value is cached.
      await expect(engines[2]!.read('k', () => 'reloaded')).resolves.toMatchObject({
        value: `v${loadsBefore}`,
        path: 'fresh',
      });
    });
  });
}
