import type { EngineRuntime } from './engine-runtime.js';
import { type Entry, isBornStale, isFresh, isServable } from './entry.js';
import type { FillProtocol } from './fill-protocol.js';
import type { Loader } from './loader.js';
import type { ResolvedPolicy } from './policy.js';
import { type ReadResult, toResult } from './read-result.js';

/**
 * A load of `key` that does not wait for expiry: `forced` (`refresh()`) takes over any load running
 * here or elsewhere; `warm` (`warm()`) waits for one instead. Either way the value comes from a load
 * that started after this call read the key.
 */
export async function reload<T>(
  runtime: EngineRuntime,
  fills: FillProtocol,
  key: string,
  loader: Loader<T>,
  policy: ResolvedPolicy,
  tags: readonly string[] | undefined,
  mode: 'forced' | 'warm',
): Promise<ReadResult<T>> {
  const snapshot = await runtime.storeGet(key);
  const current = runtime.decoded(key, snapshot.entry);
  const stale = current !== undefined && isServable(current, runtime.now()) ? current : undefined;
  const { flights } = runtime;
  const start = mode === 'forced' ? flights.restart.bind(flights) : flights.run.bind(flights);
  const fill = await start(key, snapshot.version, (cell) =>
    fills.run({ key, loader, policy, stale, tags, mode, fromVersion: snapshot.version, cell }),
  );
  // A value loaded after the call (here or elsewhere) is a miss; the fail-safe stale value says so.
  const fresh = isFresh(fill.entry, runtime.now()) && fill.entry !== stale && !isBornStale(fill.entry);
  return toResult(fill.entry as Entry<T>, fresh ? 'miss' : 'stale');
}
