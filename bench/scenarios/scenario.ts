/**
 * What a scenario module provides. The runner (bench/run.ts) runs the modules listed in
 * bench/scenarios/index.ts in order; adding a scenario (S7, the HTTP one) is one new module and
 * one line in that list.
 */
import { type Cluster } from '../harness/cluster.js';
import { type Table } from '../harness/markdown.js';
import { type BenchOptions } from '../options.js';
import { type PeerFactory } from '../peers/peer.js';

export interface ScenarioContext {
  readonly options: BenchOptions;
  /** The private redis-server of this run. */
  readonly redisUrl: string;
  readonly contenders: readonly PeerFactory[];
  /** K pods of `contender` on a namespace no other cluster of this run has used. */
  openCluster(contender: PeerFactory, scenarioId: string): Promise<Cluster>;
  /** A namespace no other part of this run has used (for pods a scenario creates itself). */
  freshNamespace(label: string): string;
  /** Calls per command on the run's redis-server since it started (harness commands excluded). */
  redisCommands(): Promise<Record<string, number>>;
  /**
   * Pins this process and the redis-server to one CPU until the returned function is called
   * (see harness/cpu-affinity.ts); `undefined` when the platform cannot.
   */
  pinToOneCpu(): Promise<(() => Promise<void>) | undefined>;
  /**
   * SIGSTOP / SIGCONT the run's redis-server: it keeps its connections and answers nothing until
   * thawed. While frozen, `redisCommands()` would time out. The runner thaws it at the end anyway.
   */
  freezeRedis(): void;
  thawRedis(): void;
  /** Progress line on stderr (stdout carries only the report). */
  progress(line: string): void;
}

/** A target from the issue, checked on the measured numbers. */
export interface TargetCheck {
  readonly scenario: string;
  readonly target: string;
  readonly measured: string;
  readonly met: boolean;
}

/** Backend calls over time, for the chart. */
export interface TimeSeries {
  readonly name: string;
  /** [seconds since the start of the measured window, loader calls in the bucket]. */
  readonly points: ReadonlyArray<readonly [number, number]>;
}

export interface ChartData {
  readonly title: string;
  readonly subtitle: string;
  readonly bucketMs: number;
  readonly yLabel: string;
  readonly series: readonly TimeSeries[];
  /** Labelled vertical lines, at seconds. */
  readonly markers?: ReadonlyArray<{ readonly x: number; readonly label: string }>;
}

export interface ScenarioOutcome {
  readonly tables: readonly Table[];
  readonly targets: readonly TargetCheck[];
  /** Raw numbers for results JSON. */
  readonly data: unknown;
  /** Loader calls over time, when the scenario is an expiry storm. */
  readonly chart?: ChartData;
}

export interface Scenario {
  readonly id: string;
  readonly title: string;
  /** Whether `--procs` applies (false: the scenario measures one instance in this process). */
  readonly usesPods: boolean;
  run(context: ScenarioContext): Promise<ScenarioOutcome>;
}
