import { HerdEngine } from '../../lib/index.js';
import { RedisStore, type RedisStoreOptions } from '../../lib/redis.js';
import { counted } from './counted.js';
import { eventually } from './deferred.js';

/** One pod of a failover test: its store (connections, near cache) and an engine over it. */
export interface FailoverPod {
  readonly store: RedisStore;
  readonly engine: HerdEngine;
}

/** Pods a failover test opens, closed after each test. */
export class FailoverPods {
  readonly #opened: FailoverPod[] = [];

  /** `count` pods of one store configuration, connected (values fresh for an hour). */
  async start(count: number, options: RedisStoreOptions): Promise<FailoverPod[]> {
    const started = Array.from({ length: count }, () => {
      const store = new RedisStore({ commandTimeout: 300, breakerCooldown: '200ms', ...options });
      const engine = new HerdEngine({ store, policy: { soft: '1h', waitTimeout: '5s' } });
      return { store, engine };
    });
    this.#opened.push(...started);
    const ready = await Promise.all(started.map((pod) => pod.store.ready(10_000)));
    if (!ready.every(Boolean)) throw new Error('a pod did not connect to Redis');
    return started;
  }

  async closeAll(): Promise<void> {
    for (const pod of this.#opened.splice(0)) {
      await pod.engine.close();
      await pod.store.close();
    }
  }
}

/** Every pod's callers (20 each) on a cold key: the answers, and how many loads ran. */
export async function herd(all: readonly FailoverPod[], key: string) {
  const loader = counted(async () => `${key} loaded`);
  const answers = await Promise.all(
    all.flatMap((pod) => Array.from({ length: 20 }, () => pod.engine.getOrLoad(key, loader))),
  );
  return { answers: new Set(answers), loads: loader.calls };
}

/**
 * Reads `keys` on every pod, over and over, until `done` settles: every read must answer (a read
 * that throws fails the test). Resolves with what they answered (`reloaded` for a value loaded in
 * the pod) and the reasons pods gave for not being up meanwhile.
 */
export async function readThrough(
  all: readonly FailoverPod[],
  keys: readonly string[],
  done: Promise<unknown>,
): Promise<{ answers: Set<unknown>; degraded: Set<string> }> {
  let settled = false;
  void done.then(
    () => (settled = true),
    () => (settled = true),
  );
  const answers = new Set<unknown>();
  const degraded = new Set<string>();
  while (!settled) {
    for (const pod of all) {
      for (const key of keys) answers.add(await pod.engine.getOrLoad(key, () => 'reloaded'));
      const health = pod.store.health();
      if (health.status !== 'up') degraded.add(health.reason ?? health.status);
    }
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  await done;
  return { answers, degraded };
}

/** What pods answered, less the values they loaded themselves while the store was away. */
export function fromTheStore(answers: Set<unknown>): unknown[] {
  return [...answers].filter((answer) => answer !== 'reloaded');
}

/**
 * Each pod writes until a write succeeds: a pod learns of a failover from its next write, and
 * moves to the new primary.
 */
export async function untilEachWrites(all: readonly FailoverPod[]): Promise<void> {
  for (const [i, pod] of all.entries()) {
    await eventually(
      () =>
        pod.engine.set(`moved:${i}`, true).then(
          () => true,
          () => false,
        ),
      10_000,
      `pod ${i} writing to the new primary`,
    );
  }
}

/** Every pod healthy again. */
export function untilAllUp(all: readonly FailoverPod[]): Promise<void> {
  return eventually(
    async () => all.every((pod) => pod.store.health().status === 'up'),
    10_000,
    'every pod up',
  );
}

/** Every pod serving `value` for `key`. */
export function untilAllServe(
  all: readonly FailoverPod[],
  key: string,
  value: unknown,
): Promise<void> {
  return eventually(
    async () =>
      (await Promise.all(all.map((pod) => pod.engine.getOrLoad(key, () => undefined)))).every(
        (served) => served === value,
      ),
    5_000,
    `every pod serving ${String(value)} for ${key}`,
  );
}
