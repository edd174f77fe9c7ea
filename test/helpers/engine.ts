import {
  type CachePolicy,
  HerdEngine,
  type HerdEngineOptions,
  MemoryStore,
} from '../../lib/index.js';
import { ManualClock } from './clock.js';
import { counted } from './counted.js';
import { deferred, until } from './deferred.js';

/** An engine over a store of its own in memory, as the module opens by default. */
export function memoryEngine(options: Omit<HerdEngineOptions, 'store'> = {}): HerdEngine {
  return new HerdEngine({ store: new MemoryStore(), ...options });
}

/** An engine and its memory store on a clock the test moves, with jitter draws fixed at 0.5. */
export function engineWithClock(policy: CachePolicy) {
  const clock = new ManualClock();
  const store = new MemoryStore({ now: clock.now });
  const engine = new HerdEngine({ store, policy, now: clock.now, random: () => 0.5 });
  return { engine, clock, store };
}

/** `k` loaded as v1, then past its soft TTL, with one refresh started and held on `gate` until the test says. */
export async function staleWithRefreshInFlight(policy: CachePolicy) {
  const { engine, clock } = engineWithClock(policy);
  await engine.getOrLoad('k', () => 'v1');
  clock.advance(2_000);
  const gate = deferred<string>();
  const loader = counted(() => gate.promise);
  const stale = await engine.read('k', loader);
  await until(() => loader.calls === 1); // the refresh is reading the backend now
  return { engine, clock, gate, loader, stale };
}
