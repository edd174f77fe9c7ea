/**
 * S4 steady churn: every pod keeps C workers reading random keys among 100 for a few seconds;
 * soft TTL 500 ms, loader 20 ms, so every key expires about six times during the window. Counts
 * backend calls per key per TTL period (1 is the floor for a cache that keeps every key fresh),
 * and the throughput all pods reach together.
 */
import { Histogram } from '../harness/histogram.js';
import { int, ms, rate, ratio, type Table } from '../harness/markdown.js';
import { sleep } from '../harness/time.js';
import { HERD_GUARD_REDIS, SINGLEFLIGHT } from '../contenders.js';
import { type PeerFactory, type PeerTtl } from '../peers/peer.js';
import { bucketCalls, describeErrors, mergeCounts, prefill, total } from './common.js';
import { type Scenario, type ScenarioContext, type ScenarioOutcome } from './scenario.js';

const KEY_COUNT = 100;
const LOADER_MS = 20;
const TTL: PeerTtl = { softMs: 500, hardMs: 5_000 };
const BUCKET_MS = 100;
const TARGET_CALLS_PER_KEY_PERIOD = 1.1;

interface ChurnRow {
  readonly contender: string;
  readonly loaderCalls: number;
  /** Loader calls / (keys x TTL periods in the window). */
  readonly perKeyPeriod: number;
  /** The same for the key loaded most often. */
  readonly worstKeyPerPeriod: number;
  readonly ops: number;
  readonly opsPerSecond: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
  readonly errors: Record<string, number>;
  readonly timeline: Array<[number, number]>;
  readonly countMismatch?: string;
}

export const s4SteadyChurn: Scenario = {
  id: 'S4',
  title: 'steady churn',
  usesPods: true,
  async run(context) {
    const rows: ChurnRow[] = [];
    for (const contender of context.contenders) {
      context.progress(`S4 ${contender.name}`);
      rows.push(await measure(context, contender));
    }
    return outcome(context, rows);
  },
};

function durationMs(context: ScenarioContext): number {
  return context.options.quick ? 1_000 : 3_000;
}

async function measure(context: ScenarioContext, contender: PeerFactory): Promise<ChurnRow> {
  const windowMs = durationMs(context);
  const cluster = await context.openCluster(contender, 'S4');
  try {
    const keys = Array.from({ length: KEY_COUNT }, (_, i) => `k${i}`);
    await prefill(cluster, keys, TTL, LOADER_MS);
    await cluster.takeLoaderCalls();
    await cluster.collectGarbage();
    const results = await cluster.churn({
      keyPrefix: 'k',
      keyCount: KEY_COUNT,
      workers: context.options.callers,
      durationMs: windowMs,
      ttl: TTL,
      loader: { delayMs: LOADER_MS, value: 'v' },
    });
    // Refreshes started by the last reads of the window land shortly after it.
    await sleep(LOADER_MS * 5 + 100);
    const tally = await cluster.takeLoaderCalls();
    const startedAt = Math.min(...results.map((result) => result.startedAtEpochMs));
    const latency = new Histogram();
    for (const result of results) latency.mergeData(result.latency);
    const ops = results.reduce((sum, result) => sum + result.ops, 0);
    const elapsedMs = Math.max(...results.map((result) => result.elapsedMs));
    const periods = windowMs / TTL.softMs;
    const perKey = new Map<string, number>();
    for (const call of tally.calls)
      perKey.set(call.key ?? '?', (perKey.get(call.key ?? '?') ?? 0) + 1);
    return {
      contender: contender.name,
      loaderCalls: tally.count,
      perKeyPeriod: tally.count / (KEY_COUNT * periods),
      worstKeyPerPeriod: Math.max(0, ...perKey.values()) / periods,
      ops,
      opsPerSecond: ops / (elapsedMs / 1000),
      p50: latency.percentile(0.5),
      p99: latency.percentile(0.99),
      max: latency.maxMs,
      errors: mergeCounts(results.map((result) => result.errors)),
      timeline: bucketCalls(tally.calls, startedAt, windowMs + LOADER_MS * 5, BUCKET_MS),
      ...(tally.mismatch === undefined ? {} : { countMismatch: tally.mismatch }),
    };
  } finally {
    await cluster.close();
  }
}

function outcome(context: ScenarioContext, rows: ChurnRow[]): ScenarioOutcome {
  const { pods, callers } = context.options;
  const windowMs = durationMs(context);
  const table: Table = {
    title: `S4 steady churn (${pods} pods x ${callers} workers, ${KEY_COUNT} keys, ${ms(windowMs)}, soft ${ms(TTL.softMs)} / hard ${ms(TTL.hardMs)}, loader ${LOADER_MS} ms)`,
    headers: [
      'contender',
      'loader calls',
      'calls/key/period',
      'worst key',
      'ops',
      'ops/s',
      'p50',
      'p99',
      'max',
      'errors',
    ],
    rows: rows.map((row) => [
      row.contender,
      int(row.loaderCalls),
      row.perKeyPeriod.toFixed(2),
      row.worstKeyPerPeriod.toFixed(2),
      int(row.ops),
      rate(row.opsPerSecond),
      ms(row.p50),
      ms(row.p99),
      ms(row.max),
      total(row.errors) === 0 ? '0' : `${int(total(row.errors))} (${describeErrors(row.errors)})`,
    ]),
    notes: [
      `Every pod reads all keys once first (not counted), so all keys start fresh together and expire in waves. A TTL period is ${ms(TTL.softMs)}: ${windowMs / TTL.softMs} periods per key in the window.`,
      '"calls/key/period": all pods\' loader calls / (keys x periods); "worst key": the same for the most-loaded key. Each worker yields to the event loop between reads (as a request from a socket would).',
      ...rows.flatMap((row) =>
        row.countMismatch === undefined ? [] : [`${row.contender}: ${row.countMismatch}`],
      ),
    ],
  };
  const hg = rows.find((row) => row.contender === HERD_GUARD_REDIS);
  const singleflight = rows.find((row) => row.contender === SINGLEFLIGHT);
  const loads = `<= ${TARGET_CALLS_PER_KEY_PERIOD} loader calls per key per TTL period, all pods`;
  const loadsMeasured = (row: ChurnRow): string =>
    `${row.perKeyPeriod.toFixed(2)} calls/key/period (worst key ${row.worstKeyPerPeriod.toFixed(2)}; ${int(row.loaderCalls)} calls)`;
  return {
    tables: [table],
    targets:
      hg === undefined
        ? []
        : [
            singleflight === undefined
              ? {
                  scenario: 'S4',
                  target: loads,
                  measured: `${loadsMeasured(hg)}, ${rate(hg.opsPerSecond)}`,
                  met: hg.perKeyPeriod <= TARGET_CALLS_PER_KEY_PERIOD,
                }
              : {
                  scenario: 'S4',
                  target: `ops/s >= ${SINGLEFLIGHT}'s, with ${loads}`,
                  measured: `${ratio(hg.opsPerSecond / singleflight.opsPerSecond)} (${rate(hg.opsPerSecond)} vs ${rate(singleflight.opsPerSecond)}); ${loadsMeasured(hg)}`,
                  met:
                    hg.opsPerSecond >= singleflight.opsPerSecond &&
                    hg.perKeyPeriod <= TARGET_CALLS_PER_KEY_PERIOD,
                },
          ],
    data: { ttl: TTL, keyCount: KEY_COUNT, loaderMs: LOADER_MS, windowMs, rows },
    chart: {
      title: 'Backend calls over time during steady churn (S4)',
      subtitle: `${pods} pods x ${callers} workers on ${KEY_COUNT} keys, soft TTL ${TTL.softMs} ms, loader ${LOADER_MS} ms; all keys start fresh at t = 0`,
      bucketMs: BUCKET_MS,
      yLabel: `loader calls per ${BUCKET_MS} ms`,
      series: rows.map((row) => ({ name: row.contender, points: row.timeline })),
      markers: [{ x: windowMs / 1000, label: 'load stops' }],
    },
  };
}
