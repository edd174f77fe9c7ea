/**
 * K pods of one contender, seen from the benchmark process. Two hosts give the same interface:
 * - `LocalHost`: every pod in this process (the default). Pods share a CPU and an event loop.
 * - `ProcessHost` (`--procs`): one forked OS process per pod, reused across contenders and
 *   scenarios; loader calls are counted with a Redis INCR, so counts do not depend on IPC.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

import { Redis } from 'ioredis';

import { type PeerFactory } from '../peers/peer.js';
import { type LoaderCall } from './loader.js';
import { type PodReply, type PodRequest } from './messages.js';
import {
  type BurstResult,
  type BurstSpec,
  type ChurnResult,
  type ChurnSpec,
  type FillSpec,
  type PhaseResult,
  PodRunner,
  type SteadySpec,
  type WatchResult,
  type WatchSpec,
} from './pod-runner.js';
import { collectGarbage } from './gc.js';
import { epochMs } from './time.js';

/** Loader calls made by the whole cluster since the last tally. */
export interface LoaderTally {
  /** The authoritative count (local log in one process; the Redis counter with --procs). */
  readonly count: number;
  readonly calls: LoaderCall[];
  /** Set when two independent counts disagree (Redis counter vs pods' logs). */
  readonly mismatch?: string;
}

export interface Cluster {
  readonly size: number;
  /** Starts the burst on every pod (or on `pods`) at the same moment; resolves when every caller has an answer. */
  burst(spec: BurstSpec, pods?: readonly number[]): Promise<BurstResult[]>;
  churn(spec: ChurnSpec): Promise<ChurnResult[]>;
  /**
   * Every pod watches `spec.key` until it serves the awaited state; pod `invalidator` (if given)
   * first makes `spec.invalidate`, the others do not. Starts at the same moment on every pod.
   */
  watch(spec: WatchSpec, invalidator?: number): Promise<WatchResult[]>;
  /** Steady reads on every pod, on the schedule `spec` gives (absolute times): each pod's phases. */
  steady(spec: SteadySpec): Promise<PhaseResult[][]>;
  /** Warms `spec.keys` on one pod. Resolves with the number of failed reads. */
  fill(pod: number, spec: FillSpec): Promise<number>;
  takeLoaderCalls(): Promise<LoaderTally>;
  /** A full garbage collection in every pod's process, before a measured step. */
  collectGarbage(): Promise<void>;
  close(): Promise<void>;
}

export interface ClusterHost {
  readonly mode: 'in-process' | 'processes';
  /** Opens K pods of `contender`, all on `namespace` (a fresh one per scenario, so every run starts cold). */
  open(contender: PeerFactory, namespace: string): Promise<Cluster>;
  shutdown(): Promise<void>;
}

export class LocalHost implements ClusterHost {
  readonly mode = 'in-process';

  constructor(
    private readonly redisUrl: string,
    private readonly pods: number,
  ) {}

  async open(contender: PeerFactory, namespace: string): Promise<Cluster> {
    const runners: PodRunner[] = [];
    try {
      for (let i = 0; i < this.pods; i++)
        runners.push(new PodRunner(await contender.createPod(this.redisUrl, namespace)));
    } catch (error) {
      await Promise.allSettled(runners.map((runner) => runner.close()));
      throw error;
    }
    return new LocalCluster(runners);
  }

  async shutdown(): Promise<void> {}
}

class LocalCluster implements Cluster {
  constructor(private readonly runners: readonly PodRunner[]) {}

  get size(): number {
    return this.runners.length;
  }

  burst(spec: BurstSpec, pods?: readonly number[]): Promise<BurstResult[]> {
    // Every pod's callers are issued in this one synchronous loop: a true simultaneous herd.
    return Promise.all(select(this.runners, pods).map((runner) => runner.burst(spec)));
  }

  churn(spec: ChurnSpec): Promise<ChurnResult[]> {
    return Promise.all(this.runners.map((runner) => runner.churn(spec)));
  }

  watch(spec: WatchSpec, invalidator?: number): Promise<WatchResult[]> {
    // One synchronous loop: the invalidation and every pod's first read start together.
    return Promise.all(
      this.runners.map((runner, pod) => runner.watch(watchSpecFor(spec, pod, invalidator))),
    );
  }

  steady(spec: SteadySpec): Promise<PhaseResult[][]> {
    return Promise.all(this.runners.map((runner) => runner.steady(spec)));
  }

  fill(pod: number, spec: FillSpec): Promise<number> {
    return this.runners[pod]!.fill(spec);
  }

  async takeLoaderCalls(): Promise<LoaderTally> {
    const calls = this.runners.flatMap((runner) => runner.takeLoaderCalls());
    return { count: calls.length, calls };
  }

  async collectGarbage(): Promise<void> {
    collectGarbage();
  }

  async close(): Promise<void> {
    await Promise.all(this.runners.map((runner) => runner.close()));
  }
}

/** How far ahead a synchronised start is scheduled, so every pod process has the message in time. */
const START_LEAD_MS = 60;
/** The same for one round of a watch (S8: hundreds of rounds, idle pod processes). */
const WATCH_LEAD_MS = 20;
const POD_SCRIPT = fileURLToPath(new URL('./pod-process.js', import.meta.url));

export class ProcessHost implements ClusterHost {
  readonly mode = 'processes';
  /** Forked on first use, reused for every cluster. */
  #children: PodProcess[] = [];
  #admin: Redis | undefined;
  #opened = 0;

  constructor(
    private readonly redisUrl: string,
    private readonly pods: number,
  ) {}

  async open(contender: PeerFactory, namespace: string): Promise<Cluster> {
    if (this.#children.length === 0) {
      this.#children = Array.from({ length: this.pods }, () => new PodProcess());
      this.#admin = new Redis(this.redisUrl);
    }
    this.#opened += 1;
    const counterKey = `bench:loader-calls:${namespace}:${this.#opened}`;
    const children = this.#children;
    await Promise.all(
      children.map((child) =>
        child.request({
          op: 'open',
          contender: contender.name,
          redisUrl: this.redisUrl,
          namespace,
          counterKey,
        }),
      ),
    );
    return new ProcessCluster(children, this.#admin!, counterKey);
  }

  async shutdown(): Promise<void> {
    await Promise.all(this.#children.map((child) => child.exit()));
    this.#children = [];
    await this.#admin?.quit();
    this.#admin = undefined;
  }
}

class ProcessCluster implements Cluster {
  constructor(
    private readonly children: readonly PodProcess[],
    private readonly admin: Redis,
    private readonly counterKey: string,
  ) {}

  get size(): number {
    return this.children.length;
  }

  burst(spec: BurstSpec, pods?: readonly number[]): Promise<BurstResult[]> {
    const timed = { ...spec, startAtEpochMs: epochMs() + START_LEAD_MS };
    return Promise.all(
      select(this.children, pods).map(
        (child) => child.request({ op: 'burst', spec: timed }) as Promise<BurstResult>,
      ),
    );
  }

  churn(spec: ChurnSpec): Promise<ChurnResult[]> {
    const timed = { ...spec, startAtEpochMs: epochMs() + START_LEAD_MS };
    return Promise.all(
      this.children.map(
        (child) => child.request({ op: 'churn', spec: timed }) as Promise<ChurnResult>,
      ),
    );
  }

  watch(spec: WatchSpec, invalidator?: number): Promise<WatchResult[]> {
    const timed = { ...spec, startAtEpochMs: epochMs() + WATCH_LEAD_MS };
    return Promise.all(
      this.children.map(
        (child, pod) =>
          child.request({
            op: 'watch',
            spec: watchSpecFor(timed, pod, invalidator),
          }) as Promise<WatchResult>,
      ),
    );
  }

  steady(spec: SteadySpec): Promise<PhaseResult[][]> {
    return Promise.all(
      this.children.map((child) => child.request({ op: 'steady', spec }) as Promise<PhaseResult[]>),
    );
  }

  fill(pod: number, spec: FillSpec): Promise<number> {
    return this.children[pod]!.request({ op: 'fill', spec }) as Promise<number>;
  }

  async takeLoaderCalls(): Promise<LoaderTally> {
    const logs = (await Promise.all(
      this.children.map((child) => child.request({ op: 'take-loader-calls' })),
    )) as LoaderCall[][];
    const calls = logs.flat();
    const count = Number((await this.admin.getdel(this.counterKey)) ?? 0);
    const mismatch =
      count === calls.length
        ? undefined
        : `Redis counter says ${count} loader calls, pod logs say ${calls.length}`;
    return mismatch === undefined ? { count, calls } : { count, calls, mismatch };
  }

  async collectGarbage(): Promise<void> {
    await Promise.all(this.children.map((child) => child.request({ op: 'gc' })));
  }

  async close(): Promise<void> {
    await Promise.all(this.children.map((child) => child.request({ op: 'close-pod' })));
  }
}

class PodProcess {
  readonly #child: ChildProcess;
  /** Requests sent and not answered yet; written by `request` and the message handler. */
  readonly #pending = new Map<
    number,
    { resolve: (value: unknown) => void; reject: (error: Error) => void }
  >();
  #nextId = 1;
  readonly #exited: Promise<void>;

  constructor() {
    this.#child = fork(POD_SCRIPT, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    this.#child.on('message', (reply: PodReply) => {
      const pending = this.#pending.get(reply.id);
      if (pending === undefined) return;
      this.#pending.delete(reply.id);
      if (reply.ok) pending.resolve(reply.result);
      else pending.reject(new Error(`pod process ${this.#child.pid}: ${reply.error}`));
    });
    // A failed send (the process is gone) is reported by 'exit' below, which rejects what is pending.
    this.#child.on('error', () => undefined);
    this.#exited = new Promise((resolve) => {
      this.#child.once('exit', (code, signal) => {
        for (const pending of this.#pending.values()) {
          pending.reject(new Error(`pod process ${this.#child.pid} exited (${signal ?? code})`));
        }
        this.#pending.clear();
        resolve();
      });
    });
  }

  request(request: PodRequest): Promise<unknown> {
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.#child.send({ ...request, id });
    });
  }

  async exit(): Promise<void> {
    if (this.#child.exitCode === null && this.#child.signalCode === null) {
      await this.request({ op: 'exit' }).catch(() => undefined);
    }
    await this.#exited;
  }
}

/** `spec` as pod `pod` runs it: only the invalidator invalidates. */
function watchSpecFor(spec: WatchSpec, pod: number, invalidator: number | undefined): WatchSpec {
  if (pod === invalidator || spec.invalidate === undefined) return spec;
  const { invalidate: _invalidate, ...watchOnly } = spec;
  return watchOnly;
}

function select<T>(all: readonly T[], indexes: readonly number[] | undefined): readonly T[] {
  return indexes === undefined ? all : indexes.map((index) => all[index]!);
}
