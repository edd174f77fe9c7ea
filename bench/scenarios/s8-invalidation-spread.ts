/**
 * S8 invalidation spread: K pods of a contender hold one key; round after round, one pod (each in
 * turn) calls `set` (a new value) or `expire` (alternately) while every pod, that one included,
 * reads the key in a loop until it serves the new state: the new value after a `set`, a stale
 * answer (or the refreshed value) after an `expire`. Measures, from the start of the invalidation
 * call, when each pod first served the new state and when all of them had.
 *
 * Contenders: those whose pods offer cluster-wide set/expire (`PeerFactory.invalidates`).
 */
import { int, ms, type Table } from '../harness/markdown.js';
import { type WatchResult } from '../harness/pod-runner.js';
import { summarize, type Summary } from '../harness/stats.js';
import { sleep } from '../harness/time.js';
import { HERD_GUARD_REDIS } from '../contenders.js';
import { type PeerFactory, type PeerTtl } from '../peers/peer.js';
import { describeErrors, mergeCounts, prefill, total } from './common.js';
import {
  type Scenario,
  type ScenarioContext,
  type ScenarioOutcome,
  type TargetCheck,
} from './scenario.js';

const KEY = 'spread';
/** Nothing expires by itself during the rounds. */
const TTL: PeerTtl = { softMs: 600_000, hardMs: 3_600_000 };
/** The refresh an `expire` starts loads the round's value in this long. */
const LOADER_MS = 2;
/** A pod that has not served the new state by then counts as not converged (and as this long). */
const TIMEOUT_MS = 3_000;
const TARGET_P99_MS = 5;

type Action = 'set' | 'expire';

interface SpreadRound {
  readonly action: Action;
  readonly invalidator: number;
  /** The invalidation call, start to resolution. */
  readonly callMs: number;
  /** Per pod: from the call's start to its first read serving the new state (undefined: not within the timeout). */
  readonly podMs: ReadonlyArray<number | undefined>;
  /** The last pod's time (undefined if a pod did not converge). */
  readonly allMs: number | undefined;
  /** The last pod's time after the call resolved (0 when all pods were there before). */
  readonly allAfterCallMs: number | undefined;
  readonly reads: number;
  /** Pods that did not serve the new value fresh within the timeout after the round (settling). */
  readonly unsettledPods: number;
}

interface SpreadRow {
  readonly contender: string;
  readonly rounds: number;
  readonly call: Summary;
  readonly all: Summary;
  readonly allAfterCall: Summary;
  readonly perPod: Summary;
  readonly invalidatingPod: Summary;
  readonly set: Summary;
  readonly expire: Summary;
  /** Rounds in which some pod did not serve the new state within the timeout. */
  readonly notConverged: number;
  readonly unsettledRounds: number;
  readonly loaderCalls: number;
  readonly errors: Record<string, number>;
  readonly roundsData: readonly SpreadRound[];
  readonly countMismatch?: string;
}

export const s8InvalidationSpread: Scenario = {
  id: 'S8',
  title: 'invalidation spread',
  usesPods: true,
  async run(context) {
    const rows: SpreadRow[] = [];
    const skipped = context.contenders.filter((contender) => contender.invalidates !== true);
    for (const contender of context.contenders.filter((c) => c.invalidates === true)) {
      context.progress(`S8 ${contender.name}`);
      rows.push(await measure(context, contender));
    }
    return outcome(context, rows, skipped);
  },
};

function roundCount(context: ScenarioContext): number {
  return context.options.quick ? 40 : 200;
}

async function measure(context: ScenarioContext, contender: PeerFactory): Promise<SpreadRow> {
  const cluster = await context.openCluster(contender, 'S8');
  try {
    await prefill(cluster, [KEY], TTL, LOADER_MS);
    await cluster.takeLoaderCalls();
    await cluster.collectGarbage();
    const rounds: SpreadRound[] = [];
    const errors: Array<Record<string, number>> = [];
    for (let round = 0; round < roundCount(context); round++) {
      const action: Action = round % 2 === 0 ? 'set' : 'expire';
      const invalidator = round % cluster.size;
      const value = `r${round + 1}`;
      const loader = { delayMs: LOADER_MS, value };
      const until = action === 'set' ? 'value' : 'value-or-stale';
      const watched = await cluster.watch(
        { key: KEY, ttl: TTL, loader, until, value, invalidate: action, timeoutMs: TIMEOUT_MS },
        invalidator,
      );
      // Unmeasured: every pod serves the new value fresh (an expire's refresh has landed) before the next round.
      const settled = await cluster.watch({
        key: KEY,
        ttl: TTL,
        loader,
        until: 'fresh-value',
        value,
        timeoutMs: TIMEOUT_MS,
      });
      errors.push(
        ...watched.map((result) => result.errors),
        ...settled.map((result) => result.errors),
      );
      rounds.push(
        toRound(
          action,
          invalidator,
          watched,
          settled.filter((result) => result.servedAtEpochMs === undefined).length,
        ),
      );
    }
    // An expire's refresh may still be writing when the last round settles elsewhere.
    await sleep(LOADER_MS * 5 + 50);
    const tally = await cluster.takeLoaderCalls();
    const orTimeout = (value: number | undefined): number => value ?? TIMEOUT_MS;
    const byAction = (action: Action): Summary =>
      summarize(
        rounds.filter((round) => round.action === action).map((round) => orTimeout(round.allMs)),
      );
    return {
      contender: contender.name,
      rounds: rounds.length,
      call: summarize(rounds.map((round) => round.callMs).filter(Number.isFinite)),
      all: summarize(rounds.map((round) => orTimeout(round.allMs))),
      allAfterCall: summarize(rounds.map((round) => orTimeout(round.allAfterCallMs))),
      perPod: summarize(rounds.flatMap((round) => round.podMs.map(orTimeout))),
      invalidatingPod: summarize(rounds.map((round) => orTimeout(round.podMs[round.invalidator]))),
      set: byAction('set'),
      expire: byAction('expire'),
      notConverged: rounds.filter((round) => round.allMs === undefined).length,
      unsettledRounds: rounds.filter((round) => round.unsettledPods > 0).length,
      loaderCalls: tally.count,
      errors: mergeCounts(errors),
      roundsData: rounds,
      ...(tally.mismatch === undefined ? {} : { countMismatch: tally.mismatch }),
    };
  } finally {
    await cluster.close();
  }
}

function toRound(
  action: Action,
  invalidator: number,
  watched: WatchResult[],
  unsettledPods: number,
): SpreadRound {
  const call = watched[invalidator]!.invalidation;
  // A failed invalidation call: nothing to time from, every pod counts as not converged.
  const startedAt = call?.startedAtEpochMs ?? Number.NaN;
  // Pod processes' clocks may differ by a few µs: never below 0.
  const podMs = watched.map((result) =>
    result.servedAtEpochMs === undefined || call === undefined
      ? undefined
      : Math.max(0, result.servedAtEpochMs - startedAt),
  );
  const converged = podMs.every((time) => time !== undefined);
  const allMs = converged ? Math.max(...(podMs as number[])) : undefined;
  return {
    action,
    invalidator,
    callMs: call === undefined ? Number.NaN : call.resolvedAtEpochMs - call.startedAtEpochMs,
    podMs,
    allMs,
    allAfterCallMs:
      allMs === undefined || call === undefined
        ? undefined
        : Math.max(0, allMs - (call.resolvedAtEpochMs - call.startedAtEpochMs)),
    reads: watched.reduce((sum, result) => sum + result.reads, 0),
    unsettledPods,
  };
}

function outcome(
  context: ScenarioContext,
  rows: SpreadRow[],
  skipped: readonly PeerFactory[],
): ScenarioOutcome {
  const { pods } = context.options;
  const expireRounds = (row: SpreadRow): number =>
    row.roundsData.filter((round) => round.action === 'expire').length;
  const table: Table = {
    title: `S8 invalidation spread (${pods} pods, ${roundCount(context)} rounds alternating set / expire, one key)`,
    headers: [
      'contender',
      'rounds',
      'call p50',
      'all pods p50',
      'all pods p99',
      'all pods max',
      'after call p99',
      'per pod p50',
      'per pod p99',
      'invalidating pod p99',
      'set p99',
      'expire p99',
      'not converged',
      'loads/expire',
      'errors',
    ],
    rows: rows.map((row) => [
      row.contender,
      int(row.rounds),
      ms(row.call.p50),
      ms(row.all.p50),
      ms(row.all.p99),
      ms(row.all.max),
      ms(row.allAfterCall.p99),
      ms(row.perPod.p50),
      ms(row.perPod.p99),
      ms(row.invalidatingPod.p99),
      ms(row.set.p99),
      ms(row.expire.p99),
      int(row.notConverged),
      (row.loaderCalls / Math.max(1, expireRounds(row))).toFixed(2),
      total(row.errors) === 0 ? '0' : `${int(total(row.errors))} (${describeErrors(row.errors)})`,
    ]),
    notes: [
      `Every pod holds the key fresh (soft ${ms(TTL.softMs)}). Each round, pod (round mod ${pods}) calls \`set\` (even rounds) or \`expire\` (odd rounds) while every pod, that one included, reads the key in a loop (one read per turn of the event loop, so notifications and bus messages are received between reads) until it serves the new state: the new value after a \`set\`; a stale answer, or the value the refresh loads (${LOADER_MS} ms loader), after an \`expire\`. herd-guard reads with \`engine.read\` (path \`stale\`), bentocache with \`getOrSet\` (its \`cache:hit\` event's \`graced\`).`,
      'Times run from the start of the invalidation call (so they include its round trip: "call p50") to the moment a pod\'s read answered with the new state. "all pods": the last pod of the round; "after call": the same minus the call\'s own duration (0 when every pod was there before the call resolved); "per pod": every pod of every round (its max is the "all pods" max); "invalidating pod": the pod that made the call.',
      `Between rounds (unmeasured) every pod reads until it serves the new value fresh, so each round starts from the same state. A pod not there within ${ms(TIMEOUT_MS)} counts as ${ms(TIMEOUT_MS)} and its round as "not converged"${rows.some((row) => row.unsettledRounds > 0) ? `; rounds that did not settle: ${rows.map((row) => `${row.contender} ${row.unsettledRounds}`).join(', ')}` : ''}.`,
      '"loads/expire": loader calls during all rounds per `expire` round (the refreshes; a `set` loads nothing).',
      ...(context.options.procs
        ? [
            "With --procs, pod times come from each pod process's clock (performance.timeOrigin), comparable to a few µs, and the polling pod processes share the machine's CPUs with redis-server: the times include waiting for a CPU.",
          ]
        : []),
      ...(skipped.length > 0
        ? [
            `Not run: ${skipped.map((contender) => contender.name).join(', ')} (no cluster-wide set/expire: the hand-written Redis read-throughs and cache-manager have no invalidation bus; herd-guard-memory pods share nothing).`,
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
            scenario: 'S8',
            target: `all ${pods} pods serve the new state within ${TARGET_P99_MS} ms of the set/expire call's start, p99 of rounds`,
            measured: `p99 ${ms(hg.all.p99)} (p50 ${ms(hg.all.p50)}, max ${ms(hg.all.max)}; ${hg.rounds - hg.notConverged} of ${hg.rounds} rounds converged)`,
            met: hg.all.p99 <= TARGET_P99_MS && hg.notConverged === 0,
          },
        ];
  return {
    tables: [table],
    targets,
    data: { ttl: TTL, loaderMs: LOADER_MS, timeoutMs: TIMEOUT_MS, rows },
  };
}
