/**
 * A model-based test of the engine: random interleavings of reads, loads (fast, slow, failing,
 * never settling), writes, invalidations, tag calls and refreshes on 2-3 engines with skewed clocks
 * over one store, checked against what the cache promises:
 * - no read that started after an invalidation resolved gets a value loaded before it, unless it
 *   is answered `stale` (a derived value included: its inputs count);
 * - no derived value whose loader read an input after a write had replaced it (on any pod) is
 *   ever answered fresh, on any pod;
 * - never a value past its hard expiry (on the reader's clock);
 * - at most one leased load of a key at a time, unless an invalidation, a refresh() or the lease's
 *   own expiry came in between, and fences grow;
 * - only typed errors; and once idle, no flight, armed wait, loader, pending store write or watch left.
 *
 * On a store that can fail (Redis), scenarios also stall the store (SIGSTOP, so loads run without a
 * lease meanwhile), kill and restart it empty, and deliver each pod's notifications late: a write
 * that was not acknowledged constrains nothing, and a restart revokes every lease, but the promises
 * above hold as they are.
 *
 * `HERD_MODEL_RUNS` sets the number of runs (CI keeps it small), `HERD_MODEL_SEED` replays a seed.
 */
import { expect } from '@jest/globals';
import fc from 'fast-check';
import {
  type CachePolicy,
  type HerdEngine,
  HerdGuardError,
  type LoadContext,
  type ReadResult,
} from '../../lib/index.js';
import { sleep, until } from '../helpers/deferred.js';

export type BaseKey = 'a' | 'b';
export type Key = BaseKey | 'd';
type Plan = 'fast' | 'slow' | 'slower' | 'crawl' | 'fail' | 'hang';
/**
 * A bad day: `slow`, every load takes longer than a holder may before it is deemed stuck (so
 * followers hedge); `failing`, every load fails.
 */
type Backend = 'slow' | 'failing';

type Step =
  | {
      readonly op: 'read';
      readonly pod: number;
      readonly key: Key;
      readonly timeoutMs: number | null;
    }
  | {
      readonly op: 'update';
      readonly pod: number;
      readonly key: BaseKey;
      readonly how: 'set' | 'expire' | 'delete';
    }
  | { readonly op: 'tag'; readonly pod: number; readonly how: 'expire' | 'delete' }
  | { readonly op: 'clear'; readonly pod: number; readonly how: 'expire' | 'delete' }
  | { readonly op: 'refresh'; readonly pod: number; readonly key: BaseKey }
  | { readonly op: 'stall'; readonly durationMs: number }
  | { readonly op: 'restart' };

export interface Scenario {
  readonly offsetsMs: readonly number[];
  readonly steps: ReadonlyArray<{ readonly gapMs: number; readonly step: Step }>;
  readonly plans: readonly Plan[];
  /** When set, every load behaves so (the plans are ignored). */
  readonly backend?: Backend | null;
  /** How late each pod hears notifications (stores with notifications only). */
  readonly notificationDelaysMs?: readonly number[];
}

/** What a cluster is started with: each pod's clock offset and notification delay. */
export interface ModelSetup {
  readonly offsetsMs: readonly number[];
  readonly notificationDelaysMs: readonly number[];
}

/** Faults of a store that can fail; each ends before the next one starts. */
export interface ModelFaults {
  /** Freezes the store (SIGSTOP) for `durationMs`, then thaws it. */
  stall(durationMs: number): Promise<void>;
  /** Kills the store and starts it again on the same port, empty. */
  restart(): Promise<void>;
}

/** Engines over one shared store, and what the check reads of the store when they are idle. */
export interface ModelCluster {
  readonly engines: readonly HerdEngine[];
  /** Followers still registered with the store(s). */
  watchers(): number;
  close(): Promise<void>;
  /** The store's faults, when scenarios may inject them. */
  readonly faults?: ModelFaults;
}

export const MODEL_POLICY: CachePolicy = {
  soft: 80,
  hard: 400,
  jitter: 0,
  leaseTtl: 100,
  waitTimeout: 150,
  loaderHardTimeout: 200,
  backoff: { initial: 20, max: 50 },
};
const LEASE_TTL_MS = 100;
/** A load on a slow backend: past waitTimeout (a holder is deemed stuck), within loaderHardTimeout. */
const CRAWL_MS = 180;
/** The shortest backoff after a failed load: half of MODEL_POLICY's initial delay. */
const BACKOFF_MIN_MS = 10;
const TAG = 'base';

/** The pod a read ran on and when it started (monotonic ms). */
interface Reader {
  readonly pod: number;
  readonly startedAtMs: number;
}

/** When an operation began: its tick and its monotonic time. */
interface Since {
  readonly tick: number;
  readonly ms: number;
}

interface Write {
  readonly dbv: number;
  readonly kind: 'set' | 'invalidation';
  readonly issuedAt: number;
  resolvedAt: number | undefined;
  /** The pod that made the call, and when it resolved (monotonic ms). */
  readonly pod: number;
  resolvedAtMs: number | undefined;
}

/** What reads on other pods than the writer's may lag behind (near cache: the notification's travel). */
export interface ModelOptions {
  /** A read on another pod may still get an older value as fresh up to this long after a write resolved. */
  readonly otherPodsLagMs?: number;
  /** Scenarios stall and restart the store, and loads may outlast a stall (the cluster has faults). */
  readonly faults?: boolean;
  /** Scenarios deliver each pod's notifications late, by up to this long (0: never). */
  readonly maxNotificationDelayMs?: number;
}

interface BaseValue {
  readonly key: BaseKey;
  readonly dbv: number;
}
interface DerivedValue {
  readonly a: BaseValue;
  readonly b: BaseValue;
  /** Which load built it (see `Model.built`). */
  readonly id: number;
}

function scenarioArbitrary(options: ModelOptions): fc.Arbitrary<Scenario> {
  const pods = 3;
  const pod = fc.integer({ min: 0, max: pods - 1 });
  const base = fc.constantFrom<BaseKey>('a', 'b');
  const faults: Array<fc.WeightedArbitrary<Step>> = options.faults
    ? [
        {
          weight: 1,
          arbitrary: fc.record({
            op: fc.constant('stall' as const),
            durationMs: fc.integer({ min: 50, max: 500 }),
          }),
        },
        { weight: 1, arbitrary: fc.constant({ op: 'restart' as const }) },
      ]
    : [];
  const plans: Plan[] = ['fast', 'fast', 'slow', 'slow', 'slow', 'fail', 'hang'];
  if (options.faults) plans.push('slower', 'slower');
  const maxDelayMs = options.maxNotificationDelayMs ?? 0;
  const delays: number[] = maxDelayMs > 0 ? [0, maxDelayMs / 2, maxDelayMs] : [0];
  const step: fc.Arbitrary<Step> = fc.oneof(
    {
      weight: 6,
      arbitrary: fc.record({
        op: fc.constant('read' as const),
        pod,
        key: fc.constantFrom<Key>('a', 'b', 'd'),
        timeoutMs: fc.option(fc.integer({ min: 1, max: 60 })),
      }),
    },
    {
      weight: 3,
      arbitrary: fc.record({
        op: fc.constant('update' as const),
        pod,
        key: base,
        how: fc.constantFrom('set' as const, 'expire' as const, 'delete' as const),
      }),
    },
    {
      weight: 1,
      arbitrary: fc.record({
        op: fc.constant('tag' as const),
        pod,
        how: fc.constantFrom('expire' as const, 'delete' as const),
      }),
    },
    {
      weight: 1,
      arbitrary: fc.record({
        op: fc.constant('clear' as const),
        pod,
        how: fc.constantFrom('expire' as const, 'delete' as const),
      }),
    },
    { weight: 1, arbitrary: fc.record({ op: fc.constant('refresh' as const), pod, key: base }) },
    ...faults,
  );
  // Mostly short gaps, so loads, invalidations and reads overlap.
  const gapMs = fc.oneof(
    { weight: 3, arbitrary: fc.constant(0) },
    { weight: 4, arbitrary: fc.integer({ min: 1, max: 6 }) },
    { weight: 1, arbitrary: fc.integer({ min: 7, max: 30 }) },
  );
  return fc.record({
    offsetsMs: fc.array(fc.constantFrom(-5_000, 0, 0, 5_000), { minLength: 2, maxLength: pods }),
    // With faults, longer scenarios: a fault matters through what runs around it.
    steps: fc.array(fc.record({ gapMs, step }), {
      minLength: options.faults ? 8 : 1,
      maxLength: 24,
      size: options.faults ? 'max' : undefined,
    }),
    plans: fc.array(fc.constantFrom<Plan>(...plans), {
      minLength: 1,
      maxLength: 12,
    }),
    backend: fc.option(fc.constantFrom<Backend>('slow', 'failing'), { freq: 4 }),
    notificationDelaysMs: fc.array(fc.constantFrom(...delays), {
      minLength: pods,
      maxLength: pods,
    }),
  });
}

/** The reference: the database, what has been invalidated when, and the loads running. */
class Model {
  /** Logical time: every event the check orders gets the next tick. */
  #clock = 0;
  readonly db: Record<BaseKey, number> = { a: 0, b: 0 };
  /**
   * Per key: every write (set() or an invalidation) with the database version it stands for, the
   * tick it was called at and the tick it resolved at (`undefined` while running).
   */
  readonly #writes: Record<BaseKey, Write[]> = { a: [], b: [] };
  /**
   * Per key: calls that revoke its lease (invalidations, refresh()), with the tick they resolved at
   * (`undefined` while running: the store may apply them at any moment until then).
   */
  readonly #revocations: Record<Key, Array<{ resolvedAt: number | undefined }>> = {
    a: [],
    b: [],
    d: [],
  };
  readonly #running: Record<Key, Array<{ fence: number; since: Since; signal: AbortSignal }>> = {
    a: [],
    b: [],
    d: [],
  };
  /**
   * Per key: its last leased load that failed: the tick its operation was issued at, and when it
   * failed (monotonic ms).
   */
  readonly #failedAt: Partial<Record<Key, Since>> = {};
  /** Restarts of the store (ticks), which lose what was acknowledged before them. */
  readonly #restarts: Array<{ start: number; end: number | undefined }> = [];
  /** Derived values built from a superseded input, by id, with why. */
  readonly #superseded = new Map<number, string>();
  readonly violations: string[] = [];

  /**
   * `faultless`: the scenario stalls and restarts nothing, so each failed load's outcome reaches
   * the store (then the next attempt waits for the backoff).
   */
  constructor(
    private readonly otherPodsLagMs = 0,
    private readonly faultless = false,
  ) {}

  tick(): number {
    return (this.#clock += 1);
  }

  /** A call that revokes `key`'s lease (and, by cascade, the derived key's) starts; call the result when it ends. */
  revoke(key: BaseKey): () => void {
    const revocation: { resolvedAt: number | undefined } = { resolvedAt: undefined };
    this.#revocations[key].push(revocation);
    this.#revocations.d.push(revocation);
    return () => {
      revocation.resolvedAt = this.tick();
    };
  }

  /**
   * A restart of the store starts; call the result when it ends. It loses every lease, and every
   * write acknowledged before it ended (no persistence): those constrain no read started after it
   * began.
   */
  restart(): () => void {
    const revocation: { resolvedAt: number | undefined } = { resolvedAt: undefined };
    for (const key of ['a', 'b', 'd'] as const) this.#revocations[key].push(revocation);
    const restart: { start: number; end: number | undefined } = {
      start: this.tick(),
      end: undefined,
    };
    this.#restarts.push(restart);
    return () => {
      revocation.resolvedAt = restart.end = this.tick();
    };
  }

  /**
   * A derived value's loader read `inputs`, each at the tick given: a value built from an input
   * that a write had already replaced when it was read (at the store, any pod's write counts) must
   * never be served fresh, on any pod.
   */
  built(id: number, inputs: ReadonlyArray<{ value: BaseValue; readAt: number }>): void {
    for (const { value, readAt } of inputs) {
      const outdatedBy = this.#fresh(value.key, value.dbv, readAt, undefined);
      if (outdatedBy !== undefined) {
        this.#superseded.set(
          id,
          `built from ${value.key}@${value.dbv}, read after the ${outdatedBy} resolved`,
        );
      }
    }
  }

  /** A write of `key` standing for database version `dbv` starts; call the result when it resolves. */
  write(key: BaseKey, dbv: number, kind: Write['kind'], pod = 0): () => void {
    const write: Write = {
      dbv,
      kind,
      issuedAt: this.tick(),
      resolvedAt: undefined,
      pod,
      resolvedAtMs: undefined,
    };
    this.#writes[key].push(write);
    return () => {
      write.resolvedAt = this.tick();
      write.resolvedAtMs = performance.now();
    };
  }

  /**
   * Whether a read of `key` started at `startedAt` may answer `dbv` as fresh: every write resolved
   * before the read stands for `dbv` or older, unless `dbv` is the value of a set() that overlapped
   * that write (concurrent writes reach the store in either order, and the later arrival wins).
   */
  #fresh(
    key: BaseKey,
    dbv: number,
    startedAt: number,
    reader: Reader | undefined,
  ): string | undefined {
    const source = this.#writes[key].find((write) => write.kind === 'set' && write.dbv === dbv);
    for (const write of this.#writes[key]) {
      if (write.resolvedAt === undefined || write.resolvedAt >= startedAt || dbv >= write.dbv)
        continue;
      if (this.#lost(write.resolvedAt, startedAt)) continue;
      // Another pod hears of a write when its notification arrives: allow that lag, if configured.
      const lagging =
        reader !== undefined &&
        write.pod !== reader.pod &&
        write.resolvedAtMs !== undefined &&
        reader.startedAtMs - write.resolvedAtMs < this.otherPodsLagMs;
      if (lagging) continue;
      const overlapped =
        source !== undefined &&
        (source.resolvedAt === undefined || source.resolvedAt > write.issuedAt);
      if (!overlapped) return `${write.kind} of ${key}@${write.dbv} on pod ${write.pod}`;
    }
    return undefined;
  }

  /**
   * A loader of `key` starts under `fence`, for an operation issued at tick `since` (its lease was
   * granted after that). Two leased loads may overlap only if the older lease was revoked after it
   * was granted (an invalidation or refresh() that had not resolved before the older one's
   * operation began), or may have lapsed (granted more than a lease TTL ago).
   */
  loadStarted(
    key: Key,
    fence: number | undefined,
    since: Since,
    signal: AbortSignal,
  ): (failed: boolean) => void {
    if (fence === undefined) return () => undefined;
    const now = performance.now();
    const failedAt = this.#failedAt[key];
    if (this.faultless && failedAt !== undefined && now - failedAt.ms < BACKOFF_MIN_MS - 1) {
      // After a failure, the cluster's next attempt waits for the backoff, unless something
      // revoked the key since (an invalidation, refresh(), a restart).
      const revoked = this.#revocations[key].some(
        (revocation) =>
          revocation.resolvedAt === undefined || revocation.resolvedAt > failedAt.tick,
      );
      if (!revoked) {
        this.violations.push(
          `${key}: loaded again ${Math.round(now - failedAt.ms)} ms after a failed load, within the backoff`,
        );
      }
    }
    /** Running leased loads of the key that nothing revoked: a takeover replaces one, once. */
    let unrevoked = 0;
    for (const other of this.#running[key]) {
      if (other.fence === fence) {
        this.violations.push(`${key}: two loads under the same lease (fence ${fence})`);
        continue;
      }
      const older = other.fence < fence ? other.since : since;
      const revoked = this.#revocations[key].some(
        (revocation) => revocation.resolvedAt === undefined || revocation.resolvedAt > older.tick,
      );
      const lapsed = now - older.ms >= LEASE_TTL_MS;
      // A load the engine gave up on (its signal fired) may still run: it stores nothing.
      if (!revoked && !other.signal.aborted) unrevoked += 1;
      if (!revoked && !lapsed) {
        this.violations.push(
          `${key}: two leased loads at once (fences ${other.fence}, ${fence}) with nothing revoking the first`,
        );
      }
    }
    if (unrevoked > 1) {
      this.violations.push(
        `${key}: ${unrevoked + 1} leased loads at once with nothing revoking them (a takeover is taken over again)`,
      );
    }
    const load = { fence, since, signal };
    this.#running[key].push(load);
    return (failed) => {
      this.#running[key] = this.#running[key].filter((running) => running !== load);
      if (failed) this.#failedAt[key] = { tick: since.tick, ms: performance.now() };
    };
  }

  /** Whether a write acknowledged at `resolvedAt` was lost by a restart begun before `startedAt`. */
  #lost(resolvedAt: number, startedAt: number): boolean {
    return this.#restarts.some(
      (restart) =>
        restart.start < startedAt && (restart.end === undefined || resolvedAt < restart.end),
    );
  }

  /** Now, as a point an operation starts at. */
  since(): Since {
    return { tick: this.tick(), ms: performance.now() };
  }

  checkRead(
    key: Key,
    startedAt: number,
    result: ReadResult<unknown>,
    readerNow: number,
    reader?: Reader,
  ): void {
    if (result.path !== 'stale' && !result.negative) {
      const superseded =
        key === 'd' ? this.#superseded.get((result.value as DerivedValue).id) : undefined;
      if (superseded !== undefined) {
        this.violations.push(
          `read of d${reader === undefined ? '' : ` on pod ${reader.pod}`} got as ${result.path} a value ${superseded}`,
        );
      }
      const values: BaseValue[] =
        key === 'd'
          ? [(result.value as DerivedValue).a, (result.value as DerivedValue).b]
          : [result.value as BaseValue];
      for (const value of values) {
        const outdatedBy = this.#fresh(value.key, value.dbv, startedAt, reader);
        if (outdatedBy !== undefined) {
          this.violations.push(
            `read of ${key}${reader === undefined ? '' : ` on pod ${reader.pod}`} started after the ${outdatedBy} resolved, and got ${value.key}@${value.dbv} as ${result.path}`,
          );
        }
      }
    }
    // A little slack: the engine checked a moment before this callback ran.
    if (result.path !== 'miss' && result.hardExpireAt <= readerNow - 10) {
      this.violations.push(`read of ${key} got a value past its hard expiry (${result.path})`);
    }
  }
}

/** Whether a loader's error is a failed load (not one stopped because it was fenced or closed). */
function failedLoad(error: unknown): boolean {
  return !(
    error instanceof Error &&
    (error.name === 'LoadFencedError' || error.name === 'ClosedError')
  );
}

/** Runs one scenario on a fresh cluster and returns what it violated (empty when all held). */
async function runScenario(
  scenario: Scenario,
  start: (setup: ModelSetup) => Promise<ModelCluster>,
  options: ModelOptions = {},
) {
  const cluster = await start({
    offsetsMs: scenario.offsetsMs,
    notificationDelaysMs: scenario.notificationDelaysMs ?? [],
  });
  const { engines } = cluster;
  const faultless = scenario.steps.every(
    ({ step }) => step.op !== 'stall' && step.op !== 'restart',
  );
  const model = new Model(options.otherPodsLagMs, faultless);
  let nextPlan = 0;
  let nextDerived = 0;
  const plan = (): Plan => scenario.plans[nextPlan++ % scenario.plans.length]!;
  const pending: Array<Promise<unknown>> = [];
  const clockOf = (pod: number) => () => Date.now() + (scenario.offsetsMs[pod] ?? 0);

  const { backend } = scenario;
  const behave = async (context: LoadContext<unknown>): Promise<void> => {
    switch (backend === 'slow' ? 'crawl' : backend === 'failing' ? 'fail' : plan()) {
      case 'fast':
        return;
      case 'slow':
        return sleep(30);
      case 'slower':
        return sleep(150);
      case 'crawl':
        return sleep(CRAWL_MS);
      case 'fail':
        throw new Error('backend failed');
      case 'hang':
        await new Promise((_, reject) => {
          context.signal.addEventListener('abort', () => reject(context.signal.reason as Error), {
            once: true,
          });
        });
    }
  };
  const baseLoader =
    (key: BaseKey, since: Since) =>
    async (context: LoadContext<unknown>): Promise<BaseValue> => {
      const done = model.loadStarted(key, context.fence, since, context.signal);
      try {
        const value = { key, dbv: model.db[key] };
        await behave(context);
        done(false);
        return value;
      } catch (error) {
        done(failedLoad(error));
        throw error;
      }
    };
  const derivedLoader =
    (engine: HerdEngine, since: Since) =>
    async (context: LoadContext<unknown>): Promise<DerivedValue> => {
      const done = model.loadStarted('d', context.fence, since, context.signal);
      try {
        const aReadAt = model.tick();
        const a = (await engine.getOrLoad('a', baseLoader('a', since), {
          tags: [TAG],
        })) as BaseValue;
        const bReadAt = model.tick();
        const b = (await engine.getOrLoad('b', baseLoader('b', since), {
          tags: [TAG],
        })) as BaseValue;
        const id = (nextDerived += 1);
        model.built(id, [
          { value: a, readAt: aReadAt },
          { value: b, readAt: bReadAt },
        ]);
        await behave(context);
        done(false);
        return { a, b, id };
      } catch (error) {
        done(failedLoad(error));
        throw error;
      }
    };
  const expectTyped = (error: unknown): void => {
    if (!(error instanceof HerdGuardError))
      model.violations.push(`untyped error: ${String(error)}`);
  };

  try {
    for (const { gapMs, step } of scenario.steps) {
      if (gapMs > 0) await sleep(gapMs);
      if (step.op === 'stall' || step.op === 'restart') {
        const { faults } = cluster;
        if (faults === undefined) continue;
        if (step.op === 'stall') pending.push(faults.stall(step.durationMs));
        else pending.push(faults.restart().finally(model.restart()));
        continue;
      }
      const pod = step.pod % engines.length;
      const engine = engines[pod]!;
      switch (step.op) {
        case 'read': {
          const since = model.since();
          const startedAt = since.tick;
          const loader =
            step.key === 'd' ? derivedLoader(engine, since) : baseLoader(step.key, since);
          const options = {
            tags: step.key === 'd' ? undefined : [TAG],
            timeout: step.timeoutMs ?? undefined,
          };
          pending.push(
            engine.read(step.key, loader, options).then(
              (result) =>
                model.checkRead(step.key, startedAt, result, clockOf(pod)(), {
                  pod,
                  startedAtMs: since.ms,
                }),
              expectTyped,
            ),
          );
          break;
        }
        case 'update': {
          const dbv = (model.db[step.key] += 1);
          const revoked = model.revoke(step.key);
          const written = model.write(
            step.key,
            dbv,
            step.how === 'set' ? 'set' : 'invalidation',
            pod,
          );
          const done =
            step.how === 'set'
              ? engine.set(step.key, { key: step.key, dbv }, { tags: [TAG] })
              : step.how === 'expire'
                ? engine.expire(step.key)
                : engine.delete(step.key);
          pending.push(done.then(written, expectTyped).finally(revoked));
          break;
        }
        case 'tag': {
          const versions = { a: (model.db.a += 1), b: (model.db.b += 1) };
          const revoked = [model.revoke('a'), model.revoke('b')];
          const written = [
            model.write('a', versions.a, 'invalidation', pod),
            model.write('b', versions.b, 'invalidation', pod),
          ];
          const done = step.how === 'expire' ? engine.expireTag(TAG) : engine.deleteTag(TAG);
          pending.push(
            done
              .then(() => written.forEach((end) => end()), expectTyped)
              .finally(() => revoked.forEach((end) => end())),
          );
          break;
        }
        case 'clear': {
          // Every key at once (derived ones too): to the model, an invalidation of both base keys.
          const versions = { a: (model.db.a += 1), b: (model.db.b += 1) };
          const revoked = [model.revoke('a'), model.revoke('b')];
          const written = [
            model.write('a', versions.a, 'invalidation', pod),
            model.write('b', versions.b, 'invalidation', pod),
          ];
          pending.push(
            engine
              .clear(step.how)
              .then(() => written.forEach((end) => end()), expectTyped)
              .finally(() => revoked.forEach((end) => end())),
          );
          break;
        }
        case 'refresh': {
          const revoked = model.revoke(step.key);
          const floor = model.db[step.key];
          pending.push(
            engine
              .refresh(step.key, baseLoader(step.key, model.since()), { tags: [TAG] })
              .then((result) => {
                const value = result.value as BaseValue;
                if (result.path === 'miss' && value.dbv < floor) {
                  model.violations.push(
                    `refresh() of ${step.key} returned ${value.dbv}, older than ${floor} at the call`,
                  );
                }
              }, expectTyped)
              .finally(revoked),
          );
          break;
        }
      }
    }
    await Promise.all(pending);
    await until(
      () =>
        engines.every((engine) => {
          const activity = engine.activity();
          return (
            activity.inflight +
              activity.armedWaits +
              activity.loaders +
              activity.pendingStoreOps ===
            0
          );
        }),
      5_000,
      'every engine to be idle (no flight, armed wait, loader or pending store write)',
    );
    if (cluster.watchers() !== 0)
      model.violations.push(`${cluster.watchers()} fill watches left registered`);
  } finally {
    await cluster.close();
  }
  return model.violations;
}

/** Checks the scenario property with fast-check; a failure reports its seed and shrunk scenario. */
export async function checkModel(
  start: (setup: ModelSetup) => Promise<ModelCluster>,
  defaultRuns: number,
  options: ModelOptions = {},
): Promise<void> {
  const numRuns = Number(process.env['HERD_MODEL_RUNS'] ?? defaultRuns);
  const seed =
    process.env['HERD_MODEL_SEED'] === undefined
      ? undefined
      : Number(process.env['HERD_MODEL_SEED']);
  const property = fc.asyncProperty(scenarioArbitrary(options), async (scenario) => {
    const violations = await runScenario(scenario, start, options);
    expect(violations).toEqual([]);
  });
  await fc.assert(property, {
    numRuns,
    seed,
    endOnFailure: process.env['HERD_MODEL_SHRINK'] === '0',
    examples: REGRESSIONS.map((scenario) => [scenario]),
  });
}

export const MODEL_TIMEOUT_MS = 600_000;

const read = (pod: number, key: Key, gapMs = 0) => ({
  gapMs,
  step: { op: 'read' as const, pod, key, timeoutMs: null },
});
const update = (pod: number, key: BaseKey, how: 'set' | 'expire' | 'delete', gapMs = 0) => ({
  gapMs,
  step: { op: 'update' as const, pod, key, how },
});

/** Scenarios run before the random ones: each once broke a promise (or would, without its fix). */
const REGRESSIONS: readonly Scenario[] = [
  {
    offsetsMs: [-5000, -5000],
    steps: [
      { gapMs: 1, step: { op: 'read', pod: 0, key: 'a', timeoutMs: null } },
      { gapMs: 1, step: { op: 'update', pod: 0, key: 'a', how: 'set' } },
      { gapMs: 3, step: { op: 'read', pod: 0, key: 'd', timeoutMs: null } },
      { gapMs: 0, step: { op: 'update', pod: 0, key: 'b', how: 'expire' } },
      { gapMs: 5, step: { op: 'read', pod: 2, key: 'a', timeoutMs: 6 } },
      { gapMs: 6, step: { op: 'update', pod: 1, key: 'a', how: 'delete' } },
      { gapMs: 0, step: { op: 'refresh', pod: 2, key: 'a' } },
    ],
    plans: ['slow', 'slow', 'fast', 'hang', 'fail', 'hang', 'fast', 'fast'],
  },
  {
    offsetsMs: [5000, 0],
    steps: [
      { gapMs: 18, step: { op: 'refresh', pod: 1, key: 'a' } },
      { gapMs: 0, step: { op: 'update', pod: 1, key: 'a', how: 'delete' } },
      { gapMs: 0, step: { op: 'read', pod: 1, key: 'd', timeoutMs: 23 } },
      { gapMs: 0, step: { op: 'read', pod: 0, key: 'a', timeoutMs: 44 } },
      { gapMs: 17, step: { op: 'update', pod: 2, key: 'b', how: 'delete' } },
      { gapMs: 0, step: { op: 'read', pod: 2, key: 'b', timeoutMs: null } },
    ],
    plans: ['fast', 'slow', 'hang', 'fast', 'slow', 'fast', 'hang', 'slow', 'hang', 'hang', 'slow'],
  },
  // A read after expire() must not join the load that read the row before it.
  {
    offsetsMs: [0, 0],
    steps: [read(0, 'a'), update(1, 'a', 'expire', 5), read(0, 'a', 1)],
    plans: ['slow'],
  },
  {
    offsetsMs: [0, 0],
    steps: [read(0, 'a'), update(0, 'a', 'delete', 5), read(0, 'a', 1)],
    plans: ['hang', 'fast'],
  },
  // refresh() takes over a hung load: two leased loads, the first one revoked.
  {
    offsetsMs: [-5_000, -5_000],
    steps: [
      read(0, 'b'),
      { gapMs: 0, step: { op: 'refresh', pod: 0, key: 'b' } },
      update(0, 'a', 'set', 1),
    ],
    plans: ['hang'],
  },
  // Index deadlines on a pod whose clock is behind must not drop the dependency links.
  {
    offsetsMs: [-5_000, -5_000],
    steps: [
      { gapMs: 1, step: { op: 'read', pod: 0, key: 'd', timeoutMs: 1 } },
      read(0, 'a', 4),
      read(1, 'a', 1),
      { gapMs: 0, step: { op: 'tag', pod: 0, how: 'expire' } },
      { gapMs: 2, step: { op: 'read', pod: 1, key: 'd', timeoutMs: 46 } },
    ],
    plans: ['fast', 'fast', 'slow', 'fast', 'fail', 'fail', 'fast'],
  },
  // set() and delete() of one pod reach the store in the order they were called.
  {
    offsetsMs: [-5_000, -5_000],
    steps: [
      update(0, 'b', 'set'),
      update(0, 'b', 'delete'),
      { gapMs: 2, step: { op: 'read', pod: 0, key: 'b', timeoutMs: 1 } },
      read(0, 'a'),
    ],
    plans: ['fast', 'slow', 'fast', 'fast', 'fail'],
  },
  // A pod that hears of writes 400 ms late loads a derived value right after another pod's set()
  // of its input: the loader must read the input at the store, not from the pod's copy.
  {
    offsetsMs: [0, 0],
    notificationDelaysMs: [400, 0],
    steps: [read(0, 'a'), update(1, 'a', 'set', 5), read(0, 'd', 20), read(1, 'd', 5)],
    plans: ['fast'],
  },
  // Found by the model (shrunk): pod 0 hears of writes 400 ms late, and its derived load read b
  // from its own copy after pod 1's set() of b had resolved.
  {
    offsetsMs: [-5_000, -5_000],
    notificationDelaysMs: [400, 0, 0],
    steps: [
      update(0, 'b', 'set'),
      read(0, 'a', 7),
      read(0, 'a', 1),
      update(1, 'b', 'set'),
      read(0, 'a', 1),
      read(0, 'd', 1),
      { gapMs: 1, step: { op: 'read', pod: 0, key: 'a', timeoutMs: 1 } },
      { gapMs: 7, step: { op: 'refresh', pod: 0, key: 'a' } },
    ],
    plans: ['fast'],
  },
  // Found by the model (shrunk): after a clear() resolved on pod 0, Redis stalled; reads of a there
  // (the store unreadable) joined the load that began before the clear and got its value.
  {
    offsetsMs: [-5000, -5000],
    steps: [
      { gapMs: 1, step: { op: 'read', pod: 0, key: 'a', timeoutMs: null } },
      { gapMs: 7, step: { op: 'clear', pod: 0, how: 'expire' } },
      { gapMs: 0, step: { op: 'stall', durationMs: 115 } },
      update(0, 'a', 'set', 1),
      read(0, 'a', 3),
      { gapMs: 1, step: { op: 'read', pod: 0, key: 'a', timeoutMs: 24 } },
      read(1, 'b', 3),
      { gapMs: 0, step: { op: 'read', pod: 0, key: 'a', timeoutMs: 19 } },
      update(2, 'b', 'expire', 1),
      { gapMs: 2, step: { op: 'read', pod: 2, key: 'a', timeoutMs: 1 } },
      read(0, 'b'),
    ],
    plans: ['slow', 'fail'],
  },
  // A backend slow for every key: followers deem holders stuck (after waitTimeout, 150 ms here) and
  // take each over once, never again.
  {
    offsetsMs: [0, 0, 0],
    steps: [
      read(0, 'a'),
      read(1, 'a'),
      read(2, 'a'),
      read(0, 'b', 1),
      read(1, 'd'),
      read(2, 'b', 2),
      update(0, 'a', 'set', 50),
      read(1, 'a', 5),
      read(2, 'd', 5),
    ],
    plans: ['fast'],
    backend: 'slow',
  },
  // A backend failing for every key: every waiter gets the failure, one attempt per backoff step.
  {
    offsetsMs: [0, 5_000, 0],
    steps: [
      read(0, 'a'),
      read(1, 'a'),
      read(2, 'a', 1),
      read(0, 'd', 5),
      read(1, 'a', 15),
      read(2, 'a', 15),
      update(1, 'a', 'expire'),
      read(0, 'a', 1),
      read(1, 'b', 40),
      read(2, 'd'),
    ],
    plans: ['fast'],
    backend: 'failing',
  },
];
