/**
 * S6 failing backend: every pod has the key (v1); after soft expiry the backend fails every call
 * for 2 s while herds of K x C callers keep asking, one burst every 200 ms. Counts the errors
 * returned to callers and the loader attempts (the backend load during an outage), per burst.
 */
import { int, ms, type Table } from '../harness/markdown.js';
import { summarize } from '../harness/stats.js';
import { epochMs, sleep, sleepUntil } from '../harness/time.js';
import { HERD_GUARD_REDIS } from '../contenders.js';
import { type PeerFactory, type PeerTtl } from '../peers/peer.js';
import {
  describeErrors,
  describeValues,
  HERD_GUARD_JITTER,
  mergeCounts,
  prefill,
  total,
} from './common.js';
import { type Scenario, type ScenarioContext, type ScenarioOutcome } from './scenario.js';

const KEY = 'hot';
const TTL: PeerTtl = { softMs: 1_000, hardMs: 10_000 };
const BURST_EVERY_MS = 200;
/** herd-guard's default first backoff delay is 1 s with equal jitter: 0.5 s to 1 s. */
const MIN_BACKOFF_MS = 500;

interface OutageRow {
  readonly contender: string;
  readonly attempts: number;
  /** Loader attempts started during each burst's slot (from its start to the next burst's start). */
  readonly attemptsPerBurst: number[];
  /** Start of each attempt, ms since the outage began. */
  readonly attemptTimesMs: number[];
  readonly errors: Record<string, number>;
  readonly values: Record<string, number>;
  readonly callers: number;
  /** p99 latency of each burst, ms. */
  readonly p99PerBurst: number[];
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
  readonly countMismatch?: string;
}

export const s6FailingBackend: Scenario = {
  id: 'S6',
  title: 'failing backend',
  usesPods: true,
  async run(context) {
    const rows: OutageRow[] = [];
    for (const contender of context.contenders) {
      context.progress(`S6 ${contender.name}`);
      rows.push(await measure(context, contender));
    }
    return outcome(context, rows);
  },
};

function outageMs(context: ScenarioContext): number {
  return context.options.quick ? 1_000 : 2_000;
}

async function measure(context: ScenarioContext, contender: PeerFactory): Promise<OutageRow> {
  const { callers, loaderMs } = context.options;
  const cluster = await context.openCluster(contender, 'S6');
  try {
    await prefill(cluster, [KEY], TTL, loaderMs);
    await sleep(TTL.softMs * (1 + HERD_GUARD_JITTER) + 150);
    await cluster.takeLoaderCalls();
    await cluster.collectGarbage();
    const outageStart = epochMs();
    const failUntilEpochMs = outageStart + outageMs(context);
    const loader = { delayMs: loaderMs, value: 'v2', failUntilEpochMs };
    const burstStarts: number[] = [];
    const latencies: number[] = [];
    const p99PerBurst: number[] = [];
    const errors: Array<Record<string, number>> = [];
    const values: Array<Record<string, number>> = [];
    for (let slot = outageStart; slot < failUntilEpochMs; slot += BURST_EVERY_MS) {
      await sleepUntil(slot);
      // A burst that is still running delays the next one (no overlap between bursts).
      const results = await cluster.burst({ key: KEY, callers, ttl: TTL, loader });
      burstStarts.push(Math.min(...results.map((result) => result.startedAtEpochMs)));
      p99PerBurst.push(summarize(results.flatMap((result) => result.latenciesMs)).p99);
      for (const result of results) {
        latencies.push(...result.latenciesMs);
        errors.push(result.errors);
        values.push(result.values);
      }
    }
    // Attempts already started finish (and fail) after the last burst.
    await sleep(loaderMs * 2 + 200);
    const tally = await cluster.takeLoaderCalls();
    const attemptsPerBurst = burstStarts.map(() => 0);
    for (const call of tally.calls) {
      let slot = burstStarts.length - 1;
      while (slot > 0 && call.atMs < burstStarts[slot]!) slot -= 1;
      attemptsPerBurst[slot]! += 1;
    }
    const latency = summarize(latencies);
    return {
      contender: contender.name,
      attempts: tally.count,
      attemptsPerBurst,
      attemptTimesMs: tally.calls.map((call) => call.atMs - outageStart).sort((a, b) => a - b),
      errors: mergeCounts(errors),
      values: mergeCounts(values),
      callers: latencies.length,
      p99PerBurst,
      p50: latency.p50,
      p99: latency.p99,
      max: latency.max,
      ...(tally.mismatch === undefined ? {} : { countMismatch: tally.mismatch }),
    };
  } finally {
    await cluster.close();
  }
}

function outcome(context: ScenarioContext, rows: OutageRow[]): ScenarioOutcome {
  const { pods, callers, loaderMs } = context.options;
  const outage = outageMs(context);
  const table: Table = {
    title: `S6 failing backend (${pods} pods x ${callers} callers per burst, a burst every ${BURST_EVERY_MS} ms during a ${ms(outage)} outage, loader ${loaderMs} ms then throws)`,
    headers: [
      'contender',
      'callers',
      'errors',
      'loader attempts',
      'attempts per burst',
      'p50',
      'p99',
      'max',
      'values served',
    ],
    rows: rows.map((row) => [
      row.contender,
      int(row.callers),
      total(row.errors) === 0 ? '0' : `${int(total(row.errors))} (${describeErrors(row.errors)})`,
      int(row.attempts),
      row.attemptsPerBurst.join(' '),
      ms(row.p50),
      ms(row.p99),
      ms(row.max),
      describeValues(row.values),
    ]),
    notes: [
      `Every pod has read the key (v1, soft ${ms(TTL.softMs)}, hard ${ms(TTL.hardMs)}); the outage starts after soft expiry, so a stale value is servable throughout.`,
      '"attempts per burst": loader calls started from one burst\'s start to the next one\'s, cluster-wide.',
      ...rows.map(
        (row) =>
          `${row.contender}: attempts at ${row.attemptTimesMs.length > 12 ? `${row.attemptTimesMs.length} times` : row.attemptTimesMs.map((t) => `${Math.round(t)}`).join(', ') || 'none'} ms after the outage began`,
      ),
      ...rows.flatMap((row) =>
        row.countMismatch === undefined ? [] : [`${row.contender}: ${row.countMismatch}`],
      ),
    ],
  };
  const hg = rows.find((row) => row.contender === HERD_GUARD_REDIS);
  const targets =
    hg === undefined
      ? []
      : (() => {
          const gaps = hg.attemptTimesMs.slice(1).map((t, i) => t - hg.attemptTimesMs[i]!);
          const maxPerBurst = Math.max(0, ...hg.attemptsPerBurst);
          const backoffHeld = gaps.every((gap) => gap >= MIN_BACKOFF_MS);
          return [
            {
              scenario: 'S6',
              target: 'zero errors while a stale value is servable',
              measured: `${int(total(hg.errors))} errors for ${int(hg.callers)} callers`,
              met: total(hg.errors) === 0,
            },
            {
              scenario: 'S6',
              target: 'one loader attempt per burst for the whole cluster, then the backoff',
              measured: `per burst: ${hg.attemptsPerBurst.join(' ')}; gaps between attempts ${gaps.map((gap) => `${Math.round(gap)}`).join(', ') || '-'} ms (>= ${MIN_BACKOFF_MS} ms expected)`,
              met: hg.attemptsPerBurst[0] === 1 && maxPerBurst <= 1 && backoffHeld,
            },
          ];
        })();
  return {
    tables: [table],
    targets,
    data: { ttl: TTL, outageMs: outage, burstEveryMs: BURST_EVERY_MS, rows },
  };
}
