/**
 * S9 Redis frozen during steady reads: every pod keeps C loops reading cached keys (most fresh, some
 * past their soft TTL); after a warm-up the run's redis-server is frozen (SIGSTOP: connections stay
 * open, nothing is answered) for a few seconds, then thawed while the reads go on. Latency and
 * errors of the reads started before, during and after the freeze, and the loader calls of each
 * phase.
 */
import { Histogram } from '../harness/histogram.js';
import { int, ms, type Table } from '../harness/markdown.js';
import { type PhaseResult, type SteadySpec } from '../harness/pod-runner.js';
import { epochMs, sleep, sleepUntil } from '../harness/time.js';
import { HERD_GUARD_REDIS } from '../contenders.js';
import { type PeerFactory } from '../peers/peer.js';
import { describeErrors, mergeCounts, prefill, total } from './common.js';
import {
  type Scenario,
  type ScenarioContext,
  type ScenarioOutcome,
  type TargetCheck,
} from './scenario.js';

/** Fresh for the whole run. */
const FRESH = {
  keyPrefix: 'f',
  keyCount: 80,
  ttl: { softMs: 600_000, hardMs: 3_600_000 },
} as const;
/** Past soft expiry within half a second of any refresh: stale for most of the freeze. */
const STALE = { keyPrefix: 's', keyCount: 20, ttl: { softMs: 500, hardMs: 600_000 } } as const;
const LOADER_MS = 20;
/** The loops start this long after the schedule is made (pod processes get the message first). */
const START_LEAD_MS = 100;
const TARGET_P99_MS = 10;
/** As the pods count reads (see SteadySpec). */
const PHASES = ['before', 'frozen', 'after thaw'] as const;

interface Windows {
  readonly warmupMs: number;
  readonly frozenMs: number;
  readonly afterMs: number;
}

interface PhaseRow {
  readonly ops: number;
  readonly errors: Record<string, number>;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
  readonly loaderCalls: number;
}

interface FrozenRow {
  readonly contender: string;
  /** In the order of PHASES. */
  readonly phases: readonly PhaseRow[];
  /** When the freeze and thaw happened, ms after their planned times. */
  readonly freezeLateMs: number;
  readonly thawLateMs: number;
  readonly countMismatch?: string;
}

export const s9RedisFrozen: Scenario = {
  id: 'S9',
  title: 'Redis frozen during steady reads',
  usesPods: true,
  async run(context) {
    const rows: FrozenRow[] = [];
    for (const contender of context.contenders) {
      context.progress(`S9 ${contender.name}`);
      rows.push(await measure(context, contender));
    }
    return outcome(context, rows);
  },
};

function windows(context: ScenarioContext): Windows {
  return context.options.quick
    ? { warmupMs: 500, frozenMs: 2_000, afterMs: 1_000 }
    : { warmupMs: 1_000, frozenMs: 5_000, afterMs: 2_000 };
}

async function measure(context: ScenarioContext, contender: PeerFactory): Promise<FrozenRow> {
  const { warmupMs, frozenMs, afterMs } = windows(context);
  const cluster = await context.openCluster(contender, 'S9');
  try {
    for (const group of [FRESH, STALE]) {
      const keys = Array.from({ length: group.keyCount }, (_, i) => `${group.keyPrefix}${i}`);
      await prefill(cluster, keys, group.ttl, LOADER_MS);
    }
    await cluster.takeLoaderCalls();
    await cluster.collectGarbage();
    const startAt = epochMs() + START_LEAD_MS;
    const freezeAt = startAt + warmupMs;
    const thawAt = freezeAt + frozenMs;
    const spec: SteadySpec = {
      groups: [FRESH, STALE],
      workers: context.options.callers,
      startAtEpochMs: startAt,
      windowStartEpochMs: freezeAt,
      windowEndEpochMs: thawAt,
      endAtEpochMs: thawAt + afterMs,
      loader: { delayMs: LOADER_MS, value: 'v2' },
    };
    const reading = cluster.steady(spec).then(
      (results) => ({ results }),
      (error: unknown) => ({ error }),
    );
    let frozeAt = Number.NaN;
    let thawedAt = Number.NaN;
    try {
      await sleepUntil(freezeAt);
      context.freezeRedis();
      frozeAt = epochMs();
      await sleepUntil(thawAt);
    } finally {
      context.thawRedis();
      thawedAt = epochMs();
    }
    const read = await reading;
    if ('error' in read) throw read.error;
    // Refreshes started by the last reads land shortly after the window.
    await sleep(LOADER_MS * 5 + 200);
    const tally = await cluster.takeLoaderCalls();
    const loaderCalls = PHASES.map(() => 0);
    for (const call of tally.calls) {
      const phase = call.atMs >= thawAt ? 2 : call.atMs >= freezeAt ? 1 : 0;
      loaderCalls[phase]! += 1;
    }
    return {
      contender: contender.name,
      phases: PHASES.map((_, index) => phaseRow(read.results, index, loaderCalls[index]!)),
      freezeLateMs: frozeAt - freezeAt,
      thawLateMs: thawedAt - thawAt,
      ...(tally.mismatch === undefined ? {} : { countMismatch: tally.mismatch }),
    };
  } finally {
    context.thawRedis();
    await cluster.close();
  }
}

function phaseRow(
  results: ReadonlyArray<readonly PhaseResult[]>,
  index: number,
  loaderCalls: number,
): PhaseRow {
  const latency = new Histogram();
  for (const pod of results) latency.mergeData(pod[index]!.latency);
  return {
    ops: results.reduce((sum, pod) => sum + pod[index]!.ops, 0),
    errors: mergeCounts(results.map((pod) => pod[index]!.errors)),
    p50: latency.percentile(0.5),
    p99: latency.percentile(0.99),
    max: latency.maxMs,
    loaderCalls,
  };
}

function outcome(context: ScenarioContext, rows: FrozenRow[]): ScenarioOutcome {
  const { pods, callers } = context.options;
  const { warmupMs, frozenMs, afterMs } = windows(context);
  const errorCell = (errors: Record<string, number>): string =>
    total(errors) === 0 ? '0' : `${int(total(errors))} (${describeErrors(errors)})`;
  const [before, frozen, after] = [0, 1, 2] as const;
  const table: Table = {
    title: `S9 Redis frozen for ${ms(frozenMs)} during steady reads (${pods} pods x ${callers} loops, ${FRESH.keyCount} fresh + ${STALE.keyCount} soon-stale keys, loader ${LOADER_MS} ms)`,
    headers: [
      'contender',
      'before p99',
      'frozen: reads',
      'p50',
      'p99',
      'max',
      'errors',
      'after thaw: reads',
      'p50',
      'p99',
      'max',
      'errors',
      'loader calls before / frozen / after',
    ],
    rows: rows.map((row) => [
      row.contender,
      ms(row.phases[before]!.p99),
      int(row.phases[frozen]!.ops),
      ms(row.phases[frozen]!.p50),
      ms(row.phases[frozen]!.p99),
      ms(row.phases[frozen]!.max),
      errorCell(row.phases[frozen]!.errors),
      int(row.phases[after]!.ops),
      ms(row.phases[after]!.p50),
      ms(row.phases[after]!.p99),
      ms(row.phases[after]!.max),
      errorCell(row.phases[after]!.errors),
      row.phases.map((phase) => int(phase.loaderCalls)).join(' / '),
    ]),
    notes: [
      `Every pod has read every key first (fresh keys: soft ${ms(FRESH.ttl.softMs)}; soon-stale keys: soft ${ms(STALE.ttl.softMs)}, hard ${ms(STALE.ttl.hardMs)}, so they are past soft expiry for most of the freeze). The loops read random keys for ${ms(warmupMs)}, then redis-server is frozen (SIGSTOP: its connections stay open and nothing is answered) for ${ms(frozenMs)}, thawed (SIGCONT), and the loops go on for ${ms(afterMs)}.`,
      '"frozen": every read running at some moment of the freeze, however long it took (those started before it included); "after thaw": reads started after the thaw; "before": reads that ended before the freeze. Each loop yields to the event loop between reads. Loader calls count in the phase they started in.',
      `Freeze and thaw happened at most ${ms(Math.max(0, ...rows.map((row) => row.freezeLateMs)))} / ${ms(Math.max(0, ...rows.map((row) => row.thawLateMs)))} after their planned times (the phases use the planned times).`,
      ...(context.options.procs
        ? [
            'With --procs, a loader call also INCRs a Redis counter (the cluster-wide count), so a loader started during the freeze ends only after the thaw.',
          ]
        : []),
      ...rows.flatMap((row) =>
        row.countMismatch === undefined ? [] : [`${row.contender}: ${row.countMismatch}`],
      ),
    ],
  };
  const hg = rows.find((row) => row.contender === HERD_GUARD_REDIS);
  const targets: TargetCheck[] =
    hg === undefined
      ? []
      : [
          {
            scenario: 'S9',
            target: `reads running while Redis is frozen: p99 <= ${TARGET_P99_MS} ms and 0 errors`,
            measured: `p99 ${ms(hg.phases[frozen]!.p99)} (p50 ${ms(hg.phases[frozen]!.p50)}, max ${ms(hg.phases[frozen]!.max)}); ${int(total(hg.phases[frozen]!.errors))} errors in ${int(hg.phases[frozen]!.ops)} reads`,
            met: hg.phases[frozen]!.p99 <= TARGET_P99_MS && total(hg.phases[frozen]!.errors) === 0,
          },
        ];
  return {
    tables: [table],
    targets,
    data: {
      fresh: FRESH,
      stale: STALE,
      loaderMs: LOADER_MS,
      windows: windows(context),
      phases: PHASES,
      rows,
    },
  };
}
