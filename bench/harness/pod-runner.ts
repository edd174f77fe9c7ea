/**
 * The pod side of a benchmark: one PeerPod, driven by bursts and churn. Runs either in the
 * benchmark process (one runner per simulated pod) or alone in a pod process (`--procs`).
 */
import { type PeerPod, type PeerTtl } from '../peers/peer.js';
import { Histogram, type HistogramData } from './histogram.js';
import { type LoaderCall, LoaderLog, type LoaderSpec } from './loader.js';
import { epochMs, sleepUntil, yieldToLoop } from './time.js';

/** C callers asking one key at the same moment. */
export interface BurstSpec {
  readonly key: string;
  readonly callers: number;
  readonly ttl: PeerTtl;
  readonly loader: LoaderSpec;
  /** Start at this epoch time (pod processes); at once, synchronously, when absent. */
  readonly startAtEpochMs?: number;
}

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
  ) {
    this.#log = new LoaderLog(countCall);
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
    for (let i = 0; i < spec.callers; i++) {
      const startedAt = performance.now();
      calls.push(
        this.pod.get(spec.key, loader, spec.ttl).then(
          (value) => {
            latenciesMs[i] = performance.now() - startedAt;
            values[value] = (values[value] ?? 0) + 1;
          },
          (error: unknown) => {
            latenciesMs[i] = performance.now() - startedAt;
            const label = errorLabel(error);
            errors[label] = (errors[label] ?? 0) + 1;
          },
        ),
      );
    }
    return Promise.all(calls).then(() => ({ latenciesMs, errors, values, startedAtEpochMs }));
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
    return { ops, errors, latency: latency.toJSON(), elapsedMs: performance.now() - startedAt, startedAtEpochMs };
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
