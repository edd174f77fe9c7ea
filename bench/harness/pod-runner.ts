/**
 * The pod side of a benchmark: one PeerPod, driven by bursts and churn. Runs either in the
 * benchmark process (one runner per simulated pod) or alone in a pod process (`--procs`).
 */
import { type PeerPod, type PeerServed, type PeerTtl } from '../peers/peer.js';
import { Histogram, type HistogramData } from './histogram.js';
import { type HangClaim, type LoaderCall, LoaderLog, type LoaderSpec } from './loader.js';
import { epochMs, sleepUntil, yieldToLoop } from './time.js';

/** C callers asking one key at the same moment. */
export interface BurstSpec {
  readonly key: string;
  readonly callers: number;
  readonly ttl: PeerTtl;
  readonly loader: LoaderSpec;
  /** Start at this epoch time (pod processes); at once, synchronously, when absent. */
  readonly startAtEpochMs?: number;
  /**
   * Callers not answered this long after the burst started count as answered then, with the error
   * `no answer` (S10: a loader that never settles); absent: wait for every answer.
   */
  readonly deadlineMs?: number;
}

/** The error label of a caller not answered by the burst's deadline. */
export const NO_ANSWER = 'no answer';

export interface BurstResult {
  /** One per caller, from its call to its answer (value or error). */
  readonly latenciesMs: number[];
  /** Error label (herd-guard code, or error name) -> callers that got it. */
  readonly errors: Record<string, number>;
  /** Returned value -> callers that got it. */
  readonly values: Record<string, number>;
  readonly startedAtEpochMs: number;
}

/** `workers` loops reading random keys among `keyCount` for `durationMs`. */
export interface ChurnSpec {
  readonly keyPrefix: string;
  readonly keyCount: number;
  readonly workers: number;
  readonly durationMs: number;
  readonly ttl: PeerTtl;
  readonly loader: LoaderSpec;
  readonly startAtEpochMs?: number;
}

export interface ChurnResult {
  readonly ops: number;
  readonly errors: Record<string, number>;
  readonly latency: HistogramData;
  readonly elapsedMs: number;
  readonly startedAtEpochMs: number;
}

/** The state a watching pod waits for (S8). */
export type WatchTarget =
  /** Serves `value` (after a `set`). */
  | 'value'
  /** Serves anything stale, or `value` (after an `expire`: stale while the refresh that loads `value` runs). */
  | 'value-or-stale'
  /** Serves `value` fresh (the cluster has settled). */
  | 'fresh-value';

/** One pod reads `key` in a loop until it serves the awaited state; one pod invalidates first (S8). */
export interface WatchSpec {
  readonly key: string;
  readonly ttl: PeerTtl;
  /** The loader of refreshes (after an `expire`): it returns the round's new value. */
  readonly loader: LoaderSpec;
  readonly until: WatchTarget;
  readonly value: string;
  /** This pod calls `set(key, value)` or `expire(key)` first, then watches like the others. */
  readonly invalidate?: 'set' | 'expire';
  readonly timeoutMs: number;
  readonly startAtEpochMs?: number;
}

export interface WatchResult {
  /** When the first read answering the awaited state resolved; undefined if none within `timeoutMs`. */
  readonly servedAtEpochMs: number | undefined;
  readonly reads: number;
  readonly errors: Record<string, number>;
  /** The invalidation call, on the pod that made it. */
  readonly invalidation?: { readonly startedAtEpochMs: number; readonly resolvedAtEpochMs: number };
}

/**
 * `workers` loops reading random keys of `groups` from `startAtEpochMs` to `endAtEpochMs` (S9),
 * each read counted in one of three phases around a window (a Redis freeze): `before` (it ended
 * before the window opened), `during` (it was running at some moment of the window, however long
 * it took) and `after` (it started once the window had closed).
 */
export interface SteadySpec {
  readonly groups: ReadonlyArray<{
    readonly keyPrefix: string;
    readonly keyCount: number;
    readonly ttl: PeerTtl;
  }>;
  readonly workers: number;
  readonly startAtEpochMs: number;
  readonly windowStartEpochMs: number;
  readonly windowEndEpochMs: number;
  readonly endAtEpochMs: number;
  readonly loader: LoaderSpec;
}

/** The reads of one phase of a steady run. */
export interface PhaseResult {
  readonly ops: number;
  readonly errors: Record<string, number>;
  readonly latency: HistogramData;
}

/** Reads `keys` once each, concurrently (warming). */
export interface FillSpec {
  readonly keys: readonly string[];
  readonly ttl: PeerTtl;
  readonly loader: LoaderSpec;
}

export class PodRunner {
  readonly #log: LoaderLog;

  constructor(
    private readonly pod: PeerPod,
    countCall?: () => Promise<unknown>,
    claimHang?: HangClaim,
  ) {
    this.#log = new LoaderLog(countCall, claimHang);
  }

  /**
   * Issues every caller before awaiting anything, so that in one process all pods' callers start in
   * the same synchronous run when the cluster calls `burst` on each runner in a loop.
   */
  burst(spec: BurstSpec): Promise<BurstResult> {
    if (spec.startAtEpochMs !== undefined) {
      const { startAtEpochMs, ...now } = spec;
      return sleepUntil(startAtEpochMs).then(() => this.burst(now));
    }
    const loader = this.#log.loader(spec.loader);
    const latenciesMs = new Array<number>(spec.callers).fill(0);
    const errors: Record<string, number> = {};
    const values: Record<string, number> = {};
    const startedAtEpochMs = epochMs();
    const calls: Array<Promise<void>> = [];
    const answered = new Array<boolean>(spec.callers).fill(false);
    for (let i = 0; i < spec.callers; i++) {
      const startedAt = performance.now();
      calls.push(
        this.pod.get(spec.key, loader, spec.ttl).then(
          (value) => {
            if (answered[i] === true) return;
            answered[i] = true;
            latenciesMs[i] = performance.now() - startedAt;
            values[value] = (values[value] ?? 0) + 1;
          },
          (error: unknown) => {
            if (answered[i] === true) return;
            answered[i] = true;
            latenciesMs[i] = performance.now() - startedAt;
            const label = errorLabel(error);
            errors[label] = (errors[label] ?? 0) + 1;
          },
        ),
      );
    }
    const all = Promise.all(calls);
    const result = (): BurstResult => ({ latenciesMs, errors, values, startedAtEpochMs });
    const { deadlineMs } = spec;
    if (deadlineMs === undefined) return all.then(result);
    return new Promise<BurstResult>((resolve) => {
      const timer = setTimeout(() => {
        for (let i = 0; i < spec.callers; i++) {
          if (answered[i] === true) continue;
          answered[i] = true;
          latenciesMs[i] = deadlineMs;
          errors[NO_ANSWER] = (errors[NO_ANSWER] ?? 0) + 1;
        }
        resolve(result());
      }, deadlineMs);
      void all.then(() => {
        clearTimeout(timer);
        resolve(result());
      });
    });
  }

  async churn(spec: ChurnSpec): Promise<ChurnResult> {
    if (spec.startAtEpochMs !== undefined) await sleepUntil(spec.startAtEpochMs);
    const keys = Array.from({ length: spec.keyCount }, (_, i) => `${spec.keyPrefix}${i}`);
    // One loader per key, so every backend call is attributed to its key.
    const loaders = keys.map((key) => this.#log.loader(spec.loader, key));
    const latency = new Histogram();
    const errors: Record<string, number> = {};
    const startedAtEpochMs = epochMs();
    const startedAt = performance.now();
    const endAt = startedAt + spec.durationMs;
    let ops = 0;
    const worker = async (): Promise<void> => {
      while (performance.now() < endAt) {
        const index = Math.floor(Math.random() * keys.length);
        const callStartedAt = performance.now();
        try {
          await this.pod.get(keys[index]!, loaders[index]!, spec.ttl);
        } catch (error) {
          const label = errorLabel(error);
          errors[label] = (errors[label] ?? 0) + 1;
        }
        latency.record(performance.now() - callStartedAt);
        ops += 1;
        // The next request of this worker arrives through the event loop, as it would from a socket:
        // without this, a cache answering from memory would starve the loaders' timers.
        await yieldToLoop();
      }
    };
    await Promise.all(Array.from({ length: spec.workers }, worker));
    return {
      ops,
      errors,
      latency: latency.toJSON(),
      elapsedMs: performance.now() - startedAt,
      startedAtEpochMs,
    };
  }

  /**
   * Reads until the awaited state is served (each read after a turn of the event loop, so the
   * pod's notifications or bus messages are received between reads), after this pod's own
   * invalidation if it makes one.
   */
  async watch(spec: WatchSpec): Promise<WatchResult> {
    if (spec.startAtEpochMs !== undefined) await sleepUntil(spec.startAtEpochMs);
    const peer = this.pod.invalidation;
    if (peer === undefined) throw new Error('this contender has no cluster-wide set/expire');
    const errors: Record<string, number> = {};
    let invalidation: Promise<WatchResult['invalidation']> | undefined;
    if (spec.invalidate !== undefined) {
      const startedAtEpochMs = epochMs();
      const call =
        spec.invalidate === 'set'
          ? peer.set(spec.key, spec.value, spec.ttl)
          : peer.expire(spec.key);
      invalidation = call.then(
        () => ({ startedAtEpochMs, resolvedAtEpochMs: epochMs() }),
        (error: unknown) => {
          const label = `${spec.invalidate} ${errorLabel(error)}`;
          errors[label] = (errors[label] ?? 0) + 1;
          return undefined;
        },
      );
    }
    const loader = this.#log.loader(spec.loader);
    const served = (answer: PeerServed): boolean =>
      spec.until === 'value'
        ? answer.value === spec.value
        : spec.until === 'value-or-stale'
          ? answer.stale || answer.value === spec.value
          : !answer.stale && answer.value === spec.value;
    const giveUpAt = performance.now() + spec.timeoutMs;
    let servedAtEpochMs: number | undefined;
    let reads = 0;
    while (performance.now() < giveUpAt) {
      try {
        const answer = await peer.read(spec.key, loader, spec.ttl);
        reads += 1;
        if (served(answer)) {
          servedAtEpochMs = epochMs();
          break;
        }
      } catch (error) {
        const label = errorLabel(error);
        errors[label] = (errors[label] ?? 0) + 1;
      }
      await yieldToLoop();
    }
    const made = await invalidation;
    return {
      servedAtEpochMs,
      reads,
      errors,
      ...(made === undefined ? {} : { invalidation: made }),
    };
  }

  /** Resolves the phases in order: before, during, after the window. */
  async steady(spec: SteadySpec): Promise<PhaseResult[]> {
    const keys = spec.groups.flatMap((group) =>
      Array.from({ length: group.keyCount }, (_, i) => ({
        key: `${group.keyPrefix}${i}`,
        ttl: group.ttl,
      })),
    );
    const loaders = keys.map(({ key }) => this.#log.loader(spec.loader, key));
    const phases = [0, 1, 2].map(() => ({
      ops: 0,
      errors: {} as Record<string, number>,
      latency: new Histogram(),
    }));
    await sleepUntil(spec.startAtEpochMs);
    const worker = async (): Promise<void> => {
      for (;;) {
        const startedAtEpochMs = epochMs();
        if (startedAtEpochMs >= spec.endAtEpochMs) return;
        const index = Math.floor(Math.random() * keys.length);
        const startedAt = performance.now();
        let error: unknown;
        try {
          await this.pod.get(keys[index]!.key, loaders[index]!, keys[index]!.ttl);
        } catch (thrown) {
          error = thrown ?? 'undefined';
        }
        const tookMs = performance.now() - startedAt;
        const phase =
          phases[
            startedAtEpochMs >= spec.windowEndEpochMs
              ? 2
              : startedAtEpochMs + tookMs < spec.windowStartEpochMs
                ? 0
                : 1
          ]!;
        if (error !== undefined) {
          const label = errorLabel(error);
          phase.errors[label] = (phase.errors[label] ?? 0) + 1;
        }
        phase.latency.record(tookMs);
        phase.ops += 1;
        await yieldToLoop();
      }
    };
    await Promise.all(Array.from({ length: spec.workers }, worker));
    return phases.map((phase) => ({
      ops: phase.ops,
      errors: phase.errors,
      latency: phase.latency.toJSON(),
    }));
  }

  async fill(spec: FillSpec): Promise<number> {
    const settled = await Promise.allSettled(
      spec.keys.map((key) => this.pod.get(key, this.#log.loader(spec.loader, key), spec.ttl)),
    );
    return settled.filter((result) => result.status === 'rejected').length;
  }

  takeLoaderCalls(): LoaderCall[] {
    return this.#log.take();
  }

  close(): Promise<void> {
    return this.pod.close();
  }
}

/** A short, stable label: herd-guard's error code, else the error's name. */
export function errorLabel(error: unknown): string {
  if (typeof error === 'object' && error !== null) {
    const code = (error as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    const name = (error as { name?: unknown }).name;
    if (typeof name === 'string') return name;
  }
  return String(error);
}
