/**
 * S10: a stuck owner. K pods x C callers ask one hard-expired key at the same moment, and the
 * first loader call of the whole cluster never settles (a hung query). How long do the callers of
 * every pod wait, the stuck pod's own included, and how many loads does it cost?
 */
import { NO_ANSWER } from '../harness/pod-runner.js';
import { int, ms, type Table } from '../harness/markdown.js';
import { summarize, type Summary } from '../harness/stats.js';
import { epochMs, sleep } from '../harness/time.js';
import { HERD_GUARD_REDIS } from '../contenders.js';
import { type PeerFactory, type PeerTtl } from '../peers/peer.js';
import {
  commandDelta,
  describeErrors,
  describeValues,
  HERD_GUARD_JITTER,
  mergeCounts,
  total,
} from './common.js';
import { type Scenario, type ScenarioContext, type ScenarioOutcome } from './scenario.js';

const KEY = 'hot';
const TTL: PeerTtl = { softMs: 500, hardMs: 1_000 };
/** Callers still waiting this long after the herd began are counted as not answered. */
const DEADLINE_MS = 10_000;
/** Goal: every caller of every pod answered within this, p99. */
const P99_BUDGET_MS = 1_500;
/** Goal: the hung load and at most one more. */
const MAX_LOADS = 2;

interface StuckRow {
  readonly contender: string;
  /** Loader calls, the hung one included. */
  readonly loaderCalls: number;
  readonly latency: Summary;
  readonly errors: Record<string, number>;
  readonly values: Record<string, number>;
  readonly redisCommands: Record<string, number>;
  /** The unmeasured herd before expiry: the load time every pod saw. */
  readonly firstHerd: { readonly loaderCalls: number; readonly latency: Summary };
}

export const s10StuckOwner: Scenario = {
  id: 'S10',
  title: 'stuck owner',
  usesPods: true,
  async run(context) {
    const rows: StuckRow[] = [];
    for (const contender of context.contenders) {
      context.progress(`S10 ${contender.name}`);
      rows.push(await measure(context, contender));
    }
    return outcome(context, rows);
  },
};

async function measure(context: ScenarioContext, contender: PeerFactory): Promise<StuckRow> {
  const { callers, loaderMs } = context.options;
  const cluster = await context.openCluster(contender, 'S10');
  try {
    // The key is hot: its last expiry was a herd too, so every pod saw how long it loads.
    const first = await cluster.burst({
      key: KEY,
      callers,
      ttl: TTL,
      loader: { delayMs: loaderMs, value: 'v1' },
    });
    await sleep(TTL.hardMs * (1 + HERD_GUARD_JITTER) + 150);
    const firstCalls = (await cluster.takeLoaderCalls()).count;
    await cluster.collectGarbage();
    const commandsBefore = await context.redisCommands();
    const results = await cluster.burst({
      key: KEY,
      callers,
      ttl: TTL,
      loader: { delayMs: loaderMs, value: 'v2', hangFirst: `${context.freshNamespace('S10')}` },
      deadlineMs: DEADLINE_MS,
    });
    await sleep(200);
    const tally = await cluster.takeLoaderCalls();
    const redisCommands = commandDelta(commandsBefore, await context.redisCommands());
    return {
      contender: contender.name,
      loaderCalls: tally.count,
      latency: summarize(results.flatMap((result) => result.latenciesMs)),
      errors: mergeCounts(results.map((result) => result.errors)),
      values: mergeCounts(results.map((result) => result.values)),
      redisCommands,
      firstHerd: {
        loaderCalls: firstCalls,
        latency: summarize(first.flatMap((result) => result.latenciesMs)),
      },
    };
  } finally {
    const closing = cluster.close();
    // A peer that waits for its hung load on close would stop the run: give up on it.
    await Promise.race([closing, sleep(5_000)]);
  }
}

function outcome(context: ScenarioContext, rows: StuckRow[]): ScenarioOutcome {
  const { pods, callers, loaderMs } = context.options;
  const table: Table = {
    title: `S10 stuck owner (${pods} pods x ${callers} callers, loader ${loaderMs} ms, the first loader call never settles; soft ${ms(TTL.softMs)} / hard ${ms(TTL.hardMs)})`,
    headers: [
      'contender',
      'loader calls',
      'p50',
      'p99',
      'max',
      'not answered',
      'other errors',
      'Redis cmds',
      'values served',
    ],
    rows: rows.map((row) => {
      const unanswered = row.errors[NO_ANSWER] ?? 0;
      const { [NO_ANSWER]: _unanswered, ...others } = row.errors;
      return [
        row.contender,
        int(row.loaderCalls),
        ms(row.latency.p50),
        ms(row.latency.p99),
        ms(row.latency.max),
        unanswered === 0 ? '0' : `${int(unanswered)} (after ${ms(DEADLINE_MS)})`,
        total(others) === 0 ? '0' : `${int(total(others))} (${describeErrors(others)})`,
        int(total(row.redisCommands)),
        describeValues(row.values),
      ];
    }),
    notes: [
      `Every pod first takes part in an unmeasured herd on the cold key (loader ${loaderMs} ms), so each has seen how long it loads; after hard expiry (+jitter margin) the measured herd asks it again, and the first loader call of the whole cluster never settles. Latency and loader calls count every caller of every pod; a caller not answered within ${ms(DEADLINE_MS)} counts as "not answered" with that latency. Loader calls include the hung one.`,
    ],
  };
  const hg = rows.find((row) => row.contender === HERD_GUARD_REDIS);
  const targets =
    hg === undefined
      ? []
      : [
          {
            scenario: 'S10',
            target: `all callers on all pods p99 <= ${ms(P99_BUDGET_MS)}, <= ${MAX_LOADS} loader calls`,
            measured: `p99 ${ms(hg.latency.p99)} (p50 ${ms(hg.latency.p50)}, max ${ms(hg.latency.max)}), ${hg.loaderCalls} loader calls, ${int(total(hg.errors))} errors`,
            met:
              hg.latency.p99 <= P99_BUDGET_MS &&
              hg.loaderCalls <= MAX_LOADS &&
              total(hg.errors) === 0,
          },
        ];
  return {
    tables: [table],
    targets,
    data: { ttl: TTL, deadlineMs: DEADLINE_MS, rows, at: epochMs() },
  };
}
