/**
 * S1-S3: a herd of K pods x C callers asking one key at the same moment, cold (S1), after soft
 * expiry (S2) or after hard expiry (S3). One cluster per contender, on a fresh namespace.
 */
import { type LoaderCall } from '../harness/loader.js';
import { type BurstResult } from '../harness/pod-runner.js';
import { int, ms, ratio, signedMs, type Table } from '../harness/markdown.js';
import { mean, summarize, type Summary } from '../harness/stats.js';
import { epochMs, sleep } from '../harness/time.js';
import { profiled } from '../harness/herd-profile.js';
import { HERD_GUARD_MEMORY, HERD_GUARD_REDIS } from '../contenders.js';
import { type PeerFactory, type PeerTtl } from '../peers/peer.js';
import {
  bucketCalls,
  commandDelta,
  describeErrors,
  describeValues,
  HERD_GUARD_JITTER,
  mergeCounts,
  prefill,
  total,
} from './common.js';
import {
  type Scenario,
  type ScenarioContext,
  type ScenarioOutcome,
  type TargetCheck,
} from './scenario.js';

const KEY = 'hot';
const WARMUP_KEY = 'warmup';
/** Budget for the p99 targets of S2 and S3. */
export const HERD_P99_BUDGET_MS = 5;
/** S2: the Redis store's stale herd p99, at most this many times the memory store's in the same run. */
const STALE_HERD_VS_MEMORY = 1.5;
/** The bare LRU cache (no herd protection across pods) a stale herd is compared with. */
const LRU_CACHE = 'lru-cache';

export interface HerdRow {
  readonly contender: string;
  readonly loaderCalls: number;
  readonly latency: Summary;
  /** Caller latency minus the mean backend time of this herd's loader calls. */
  readonly overhead: Summary;
  readonly loaderMeanMs: number;
  readonly errors: Record<string, number>;
  readonly values: Record<string, number>;
  /** First caller issued to last caller answered. */
  readonly wallMs: number;
  /** Redis commands sent during the measured herd (and its settling), by command. */
  readonly redisCommands: Record<string, number>;
  /** The unmeasured warm-up herd on another key (JIT), for reference. */
  readonly warmup: { readonly loaderCalls: number; readonly latency: Summary };
  readonly loaderCallTimesMs: number[];
  readonly countMismatch?: string;
}

interface HerdConfig {
  readonly id: string;
  readonly title: string;
  /** Before the burst: nothing (cold), or warm every pod and wait past soft or hard expiry. */
  readonly expiry: 'cold' | 'soft' | 'hard';
  readonly ttl: PeerTtl;
  readonly explain: string;
  /** Checks on herd-guard-redis's row; `rows` has every contender's, for targets relative to another. */
  readonly targets: (
    row: HerdRow,
    context: ScenarioContext,
    rows: readonly HerdRow[],
  ) => TargetCheck[];
}

export function herdScenario(config: HerdConfig): Scenario {
  return {
    id: config.id,
    title: config.title,
    usesPods: true,
    async run(context) {
      const rows: HerdRow[] = [];
      for (const contender of context.contenders) {
        context.progress(`${config.id} ${contender.name}`);
        rows.push(await measure(context, contender, config));
      }
      return outcome(context, config, rows);
    },
  };
}

async function measure(
  context: ScenarioContext,
  contender: PeerFactory,
  config: HerdConfig,
): Promise<HerdRow> {
  const { callers, loaderMs } = context.options;
  const cluster = await context.openCluster(contender, config.id);
  const settleMs = config.expiry === 'soft' ? loaderMs * 3 + 200 : 200;
  const herd = (key: string): Promise<BurstResult[]> =>
    cluster.burst({ key, callers, ttl: config.ttl, loader: { delayMs: loaderMs, value: 'v2' } });
  try {
    if (config.expiry !== 'cold') {
      await prefill(cluster, [WARMUP_KEY, KEY], config.ttl, loaderMs);
      const expiresAfterMs = config.expiry === 'soft' ? config.ttl.softMs : config.ttl.hardMs;
      await sleep(expiresAfterMs * (1 + HERD_GUARD_JITTER) + 150);
      await cluster.takeLoaderCalls();
    }
    // The same herd on another key first, unmeasured: the code paths are compiled (JIT) and the
    // connections busy, as in a server that has been up for a while. The cache state stays cold.
    const warmup = await herd(WARMUP_KEY);
    await sleep(settleMs);
    const warmupCalls = (await cluster.takeLoaderCalls()).count;
    await cluster.collectGarbage();
    const commandsBefore = await context.redisCommands();
    const results = await profiled(`${config.id}-${contender.name}`, () => herd(KEY));
    const endedAt = epochMs();
    // Background refreshes (stale-while-revalidate) finish after the callers have their answer.
    await sleep(settleMs);
    const tally = await cluster.takeLoaderCalls();
    const redisCommands = commandDelta(commandsBefore, await context.redisCommands());
    const startedAt = Math.min(...results.map((result) => result.startedAtEpochMs));
    const latencies = results.flatMap((result) => result.latenciesMs);
    const okDurations = tally.calls.filter((call) => call.ok).map((call) => call.durationMs);
    const loaderMeanMs = okDurations.length > 0 ? mean(okDurations) : loaderMs;
    return {
      contender: contender.name,
      loaderCalls: tally.count,
      latency: summarize(latencies),
      overhead: summarize(latencies.map((latency) => latency - loaderMeanMs)),
      loaderMeanMs,
      errors: mergeCounts(results.map((result) => result.errors)),
      values: mergeCounts(results.map((result) => result.values)),
      wallMs: endedAt - startedAt,
      redisCommands,
      warmup: {
        loaderCalls: warmupCalls,
        latency: summarize(warmup.flatMap((result) => result.latenciesMs)),
      },
      loaderCallTimesMs: tally.calls
        .map((call: LoaderCall) => call.atMs - startedAt)
        .sort((a, b) => a - b),
      ...(tally.mismatch === undefined ? {} : { countMismatch: tally.mismatch }),
    };
  } finally {
    await cluster.close();
  }
}

function outcome(context: ScenarioContext, config: HerdConfig, rows: HerdRow[]): ScenarioOutcome {
  const { pods, callers, loaderMs } = context.options;
  const showOverhead = config.expiry !== 'soft';
  const table: Table = {
    title: `${config.id} ${config.title} (${pods} pods x ${callers} callers, loader ${loaderMs} ms, soft ${ms(config.ttl.softMs)} / hard ${ms(config.ttl.hardMs)})`,
    headers: [
      'contender',
      'loader calls',
      'p50',
      'p99',
      'max',
      ...(showOverhead ? ['p50 - loader', 'p99 - loader'] : []),
      'errors',
      'Redis cmds',
      'values served',
    ],
    rows: rows.map((row) => [
      row.contender,
      int(row.loaderCalls),
      ms(row.latency.p50),
      ms(row.latency.p99),
      ms(row.latency.max),
      ...(showOverhead ? [signedMs(row.overhead.p50), signedMs(row.overhead.p99)] : []),
      errorCell(row.errors),
      int(total(row.redisCommands)),
      describeValues(row.values),
    ]),
    notes: [
      config.explain,
      'Each measured herd follows an identical, unmeasured herd on another key (warm JIT, same cache state); its numbers are in latest.json (`warmup`).',
      '"Redis cmds": commands the redis-server executed during the herd and its settling, all pods, counting those run inside Lua scripts (INFO commandstats; the bench\'s own excluded). Per command in latest.json.',
      ...(showOverhead
        ? [
            '"p50/p99 - loader": caller latency minus the mean measured duration of this herd\'s loader calls (the time a caller spends on top of the backend; for herd-guard all callers but one are followers).',
          ]
        : []),
      ...rows.flatMap((row) =>
        row.countMismatch === undefined ? [] : [`${row.contender}: ${row.countMismatch}`],
      ),
    ],
  };
  const hg = rows.find((row) => row.contender === HERD_GUARD_REDIS);
  const targets = hg === undefined ? [] : config.targets(hg, context, rows);
  const timeline = rows.map((row) => ({
    name: row.contender,
    points: bucketCalls(
      row.loaderCallTimesMs.map((atMs) => ({ atMs, durationMs: 0, ok: true })),
      0,
      Math.max(1000, loaderMs * 4),
      10,
    ),
  }));
  return {
    tables: [table],
    targets,
    data: { ttl: config.ttl, expiry: config.expiry, rows },
    chart:
      config.expiry === 'hard'
        ? {
            title: `Backend calls during a hard-expiry herd (${config.id})`,
            subtitle: `${pods} pods x ${callers} callers ask one hard-expired key at t = 0; loader ${loaderMs} ms`,
            bucketMs: 10,
            yLabel: 'loader calls per 10 ms',
            series: timeline,
          }
        : undefined,
  };
}

function errorCell(errors: Record<string, number>): string {
  const count = total(errors);
  return count === 0 ? '0' : `${int(count)} (${describeErrors(errors)})`;
}

export function exactlyOneLoad(id: string, row: HerdRow, context: ScenarioContext): TargetCheck {
  return {
    scenario: id,
    target: `exactly 1 loader call for ${context.options.pods} x ${context.options.callers} callers`,
    measured: `${row.loaderCalls} loader call${row.loaderCalls === 1 ? '' : 's'}`,
    met: row.loaderCalls === 1,
  };
}

export const s1ColdHerd = herdScenario({
  id: 'S1',
  title: 'cold herd',
  expiry: 'cold',
  ttl: { softMs: 1_000, hardMs: 10_000 },
  explain: 'All callers of all pods ask one absent key at the same moment.',
  targets: (row, context) => [exactlyOneLoad('S1', row, context)],
});

export const s2SoftExpiredHerd = herdScenario({
  id: 'S2',
  title: 'soft-expired herd',
  expiry: 'soft',
  ttl: { softMs: 1_000, hardMs: 10_000 },
  explain:
    'Every pod has read the key (v1); after soft expiry (+jitter margin) the herd asks it; the loader returns v2. Loader calls include background refreshes (counted 3 loader times after the burst).',
  targets: (row, context, rows) => {
    const memory = rows.find((other) => other.contender === HERD_GUARD_MEMORY);
    const lru = rows.find((other) => other.contender === LRU_CACHE);
    return [
      exactlyOneLoad('S2', row, context),
      ...(lru === undefined
        ? []
        : [
            {
              scenario: 'S2',
              target: `callers' p99 <= 2x ${LRU_CACHE}'s + 1 ms, same run`,
              measured: `p99 ${ms(row.latency.p99)} vs ${ms(lru.latency.p99)}`,
              met: row.latency.p99 <= 2 * lru.latency.p99 + 1,
            },
          ]),
      {
        scenario: 'S2',
        target: `callers' p99 <= ${HERD_P99_BUDGET_MS} ms`,
        measured: `p99 ${ms(row.latency.p99)} (p50 ${ms(row.latency.p50)}, max ${ms(row.latency.max)})`,
        met: row.latency.p99 <= HERD_P99_BUDGET_MS,
      },
      ...(memory === undefined
        ? []
        : [
            {
              scenario: 'S2',
              target: `callers' p99 <= ${STALE_HERD_VS_MEMORY}x ${HERD_GUARD_MEMORY}'s`,
              measured: `${ratio(row.latency.p99 / memory.latency.p99)} (p99 ${ms(row.latency.p99)} vs ${ms(memory.latency.p99)})`,
              met: row.latency.p99 <= STALE_HERD_VS_MEMORY * memory.latency.p99,
            },
          ]),
    ];
  },
});

export const s3HardExpiredHerd = herdScenario({
  id: 'S3',
  title: 'hard-expired herd',
  expiry: 'hard',
  ttl: { softMs: 500, hardMs: 1_000 },
  explain:
    'Every pod has read the key (v1); after hard expiry (+jitter margin) nothing is servable and the herd asks it; the loader returns v2.',
  targets: (row, context) => [
    exactlyOneLoad('S3', row, context),
    {
      scenario: 'S3',
      target: `followers' latency minus loader time, p99 <= ${HERD_P99_BUDGET_MS} ms`,
      measured: `p99 ${signedMs(row.overhead.p99)} (p50 ${signedMs(row.overhead.p50)}; loader ${ms(row.loaderMeanMs)})`,
      met: row.overhead.p99 <= HERD_P99_BUDGET_MS,
    },
  ],
});
