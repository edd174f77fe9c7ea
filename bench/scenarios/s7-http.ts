/**
 * S7 HTTP: the app over real HTTP (Express), in its own process, loaded by autocannon from this one.
 * (a) Throughput of a trivial handler: uncached, behind herd-guard's interceptor, behind
 *     @nestjs/cache-manager's CacheInterceptor (the NestJS default), all in memory.
 * (b) The sample's GET /products/:id (SQLite, every query delayed and counted) under a burst of
 *     concurrent requests after soft expiry and after hard expiry: database queries and latency.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { int, ms, rate, ratio, type Table } from '../harness/markdown.js';
import { summarize } from '../harness/stats.js';
import { sleep } from '../harness/time.js';
import { PING_ROUTES } from '../http/routes.js';
import {
  type Scenario,
  type ScenarioContext,
  type ScenarioOutcome,
  type TargetCheck,
} from './scenario.js';

const SERVER = fileURLToPath(new URL('../http/server.js', import.meta.url));
const SOFT_MS = 1_000;
const HARD_MS = 3_000;
const ROUTES = PING_ROUTES;

interface ThroughputRow {
  readonly route: (typeof ROUTES)[number];
  /** Median of the rounds. */
  readonly requestsPerSecond: number;
  /** CPU time the app's process spent per request (user + system), median of the rounds; NaN off Linux. */
  readonly cpuPerRequestMs: number;
  /**
   * herd-guard's requests per second over this route's in the same round, median of the rounds
   * (only for the routes herd-guard is compared with).
   */
  readonly herdGuardRatio: number;
  /** Latencies of the median round (by requests per second). */
  readonly p50: number;
  readonly p99: number;
  /** Summed over the rounds. */
  readonly errors: number;
  readonly non2xx: number;
  readonly rounds: readonly RoundResult[];
}

interface RoundResult {
  readonly requestsPerSecond: number;
  readonly cpuPerRequestMs: number;
  readonly p50: number;
  readonly p99: number;
  readonly errors: number;
  readonly non2xx: number;
}

interface BurstRow {
  readonly phase: string;
  readonly requests: number;
  readonly databaseQueries: number;
  readonly xCache: Record<string, number>;
  readonly statuses: Record<string, number>;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
}

export const s7Http: Scenario = {
  id: 'S7',
  title: 'HTTP',
  usesPods: false,
  async run(context) {
    const server = await startServer(context);
    try {
      const rounds = context.options.quick ? 3 : 7;
      const throughput = await measureThroughput(context, server, rounds);
      context.progress('S7 bursts on an expiring product');
      const bursts = await runBursts(server.base, context.options.quick ? 200 : 500);
      return outcome(context, throughput, bursts, rounds);
    } finally {
      await server.stop();
    }
  },
};

interface Server {
  readonly base: string;
  /** CPU time the app's process has used so far, in ms (NaN where /proc is not there). */
  cpuMs(): number;
  stop(): Promise<void>;
}

async function startServer(context: ScenarioContext): Promise<Server> {
  const config = {
    queryDelayMs: context.options.loaderMs,
    soft: `${SOFT_MS}ms`,
    hard: `${HARD_MS}ms`,
  };
  const child: ChildProcess = fork(SERVER, [JSON.stringify(config)], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('message', (message) => resolve((message as { port: number }).port));
    child.once('exit', (code) => reject(new Error(`the S7 server exited with ${code}`)));
  });
  return {
    base: `http://127.0.0.1:${port}`,
    cpuMs: () => processCpuMs(child.pid),
    stop: async () => {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.send('stop');
      await Promise.race([exited, sleep(3_000)]);
      if (child.exitCode === null) child.kill('SIGKILL');
    },
  };
}

/**
 * Short rounds of 1 s per route, the routes taking turns, and the median round of each: on a
 * shared 2-vCPU VM the speed of both processes changes every few seconds, so one long run per
 * route compares routes measured at different speeds.
 */
async function measureThroughput(
  context: ScenarioContext,
  server: Server,
  rounds: number,
): Promise<ThroughputRow[]> {
  const results = new Map<(typeof ROUTES)[number], RoundResult[]>(
    ROUTES.map((route) => [route, []]),
  );
  // Warm up (JIT, and the cache entries of the cached routes).
  for (const route of ROUTES) await load(server, route, 1);
  for (let round = 0; round < rounds; round++) {
    context.progress(`S7 autocannon round ${round + 1} of ${rounds}`);
    // Each round starts with another route, so no route always follows the same one.
    for (let turn = 0; turn < ROUTES.length; turn++) {
      const route = ROUTES[(round + turn) % ROUTES.length]!;
      results.get(route)!.push(await load(server, route, 1));
    }
  }
  const herdGuard = results.get('herd-guard')!;
  return ROUTES.map((route) => {
    const all = results.get(route)!;
    const ratios = all
      .map((round, index) => herdGuard[index]!.requestsPerSecond / round.requestsPerSecond)
      .sort((a, b) => a - b);
    const byRate = [...all].sort((a, b) => a.requestsPerSecond - b.requestsPerSecond);
    const middle = byRate[Math.floor(byRate.length / 2)]!;
    const cpu = all.map((round) => round.cpuPerRequestMs).sort((a, b) => a - b);
    return {
      route,
      requestsPerSecond: middle.requestsPerSecond,
      cpuPerRequestMs: cpu[Math.floor(cpu.length / 2)]!,
      herdGuardRatio: ratios[Math.floor(ratios.length / 2)]!,
      p50: middle.p50,
      p99: middle.p99,
      errors: all.reduce((sum, round) => sum + round.errors, 0),
      non2xx: all.reduce((sum, round) => sum + round.non2xx, 0),
      rounds: all,
    };
  });
}

async function load(
  server: Server,
  route: ThroughputRow['route'],
  durationS: number,
): Promise<RoundResult> {
  const before = server.cpuMs();
  const result = await autocannon({
    url: `${server.base}/ping/${route}/42`,
    connections: 64,
    duration: durationS,
  });
  return {
    requestsPerSecond: result.requests.total / durationS,
    cpuPerRequestMs: (server.cpuMs() - before) / Math.max(1, result.requests.total),
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors,
    non2xx: result.non2xx,
  };
}

/** user + system CPU time of a process from /proc/<pid>/stat, in ms (clock ticks of 10 ms). */
function processCpuMs(pid: number | undefined): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return Number.NaN;
  }
}

async function stats(base: string): Promise<number> {
  const response = await fetch(`${base}/stats`);
  return ((await response.json()) as { databaseQueries: number }).databaseQueries;
}

/** `requests` concurrent GETs of one product: the answers' X-Cache, statuses and latencies. */
async function burst(base: string, id: number, requests: number, phase: string): Promise<BurstRow> {
  const before = await stats(base);
  const started = performance.now();
  const answers = await Promise.all(
    Array.from({ length: requests }, async () => {
      const response = await fetch(`${base}/products/${id}`);
      await response.arrayBuffer();
      return {
        status: response.status,
        xCache: response.headers.get('x-cache') ?? '-',
        ms: performance.now() - started,
      };
    }),
  );
  // A stale burst's refresh ends after the answers: let it land before counting queries.
  await sleep(400);
  const count = (pick: (answer: (typeof answers)[number]) => string): Record<string, number> =>
    answers.reduce<Record<string, number>>(
      (counts, answer) => ({ ...counts, [pick(answer)]: (counts[pick(answer)] ?? 0) + 1 }),
      {},
    );
  const latency = summarize(answers.map((answer) => answer.ms));
  return {
    phase,
    requests,
    databaseQueries: (await stats(base)) - before,
    xCache: count((answer) => answer.xCache),
    statuses: count((answer) => String(answer.status)),
    p50: latency.p50,
    p99: latency.p99,
    max: latency.max,
  };
}

async function runBursts(base: string, requests: number): Promise<BurstRow[]> {
  const rows: BurstRow[] = [];
  rows.push(await burst(base, 7, requests, 'cold (never read)'));
  await sleep(SOFT_MS * 1.1 + 200);
  rows.push(await burst(base, 7, requests, 'after soft expiry'));
  await sleep(HARD_MS * 1.1 + 200);
  rows.push(await burst(base, 7, requests, 'after hard expiry'));
  return rows;
}

function outcome(
  context: ScenarioContext,
  throughput: ThroughputRow[],
  bursts: BurstRow[],
  rounds: number,
): ScenarioOutcome {
  const describe = (counts: Record<string, number>): string =>
    Object.entries(counts)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([label, count]) => `${label}×${count}`)
      .join(', ');
  const uncached = throughput.find((row) => row.route === 'uncached')!;
  const throughputTable: Table = {
    title: `S7a HTTP throughput, trivial handler (Express, autocannon 64 connections, ${rounds} rounds of 1 s per route)`,
    headers: [
      'route',
      'req/s',
      'vs uncached',
      'herd-guard vs it',
      'app CPU/request',
      'p50',
      'p99',
      'errors',
      'non-2xx',
    ],
    rows: throughput.map((row) => [
      row.route,
      rate(row.requestsPerSecond),
      ratio(row.requestsPerSecond / uncached.requestsPerSecond),
      row.route === 'herd-guard' ? '-' : ratio(row.herdGuardRatio),
      Number.isNaN(row.cpuPerRequestMs) ? '-' : ms(row.cpuPerRequestMs),
      ms(row.p50),
      ms(row.p99),
      int(row.errors),
      int(row.non2xx),
    ]),
    notes: [
      'The app runs in its own process; autocannon runs in the benchmark process. Memory stores for both caches.',
      'The routes take turns in rounds of 1 s, after a warm-up round; req/s is the median round, p50/p99 are that round\'s, "app CPU/request" is the median of the app process\'s CPU time (user + system) per request. On this 2-vCPU VM the speed of both processes shifts every few seconds (one long run per route differed by up to 2x between identical runs), which the interleaved rounds share out between the routes.',
      "`noop-interceptor`: an interceptor that returns next.handle() (the cost of any interceptor); `herd-guard`: HerdGuardInterceptor (the sample's module: memory store, Prometheus metrics; the route fresh for 60 s); `cache-manager`: @nestjs/cache-manager CacheInterceptor (cache-manager 7, in-memory Keyv, TTL 60 s). Both cached routes answer hits after the warm-up round.",
      '"herd-guard vs it": herd-guard\'s req/s over the route\'s in the same round (each round starts with another route), median of the rounds.',
    ],
  };
  const burstTable: Table = {
    title: `S7b burst on one product of the sample app (soft ${ms(SOFT_MS)}, hard ${ms(HARD_MS)}, every query delayed ${context.options.loaderMs} ms)`,
    headers: ['phase', 'requests', 'database queries', 'X-Cache', 'statuses', 'p50', 'p99', 'max'],
    rows: bursts.map((row) => [
      row.phase,
      int(row.requests),
      int(row.databaseQueries),
      describe(row.xCache),
      describe(row.statuses),
      ms(row.p50),
      ms(row.p99),
      ms(row.max),
    ]),
    notes: [
      "Concurrent GET /products/7 from this process (fetch); database queries from the sample's /stats counter.",
    ],
  };
  const herdGuard = throughput.find((row) => row.route === 'herd-guard')!;
  const cacheManager = throughput.find((row) => row.route === 'cache-manager')!;
  const perRound = cacheManager.rounds
    .map((round, index) => herdGuard.rounds[index]!.requestsPerSecond / round.requestsPerSecond)
    .sort((a, b) => a - b);
  const targets: TargetCheck[] = [
    {
      scenario: 'S7',
      target: "herd-guard's hit throughput >= @nestjs/cache-manager CacheInterceptor's, same run",
      measured: `${ratio(cacheManager.herdGuardRatio)} per round (median; ${ratio(perRound[0]!)}-${ratio(perRound[perRound.length - 1]!)}), ${rate(herdGuard.requestsPerSecond)} vs ${rate(cacheManager.requestsPerSecond)}`,
      met: cacheManager.herdGuardRatio >= 1,
    },
    {
      scenario: 'S7',
      target: 'intercepted route throughput >= 0.9x the uncached route (trivial handler)',
      measured: `${ratio(herdGuard.requestsPerSecond / uncached.requestsPerSecond)} (${rate(herdGuard.requestsPerSecond)} vs ${rate(uncached.requestsPerSecond)})`,
      met: herdGuard.requestsPerSecond >= 0.9 * uncached.requestsPerSecond,
    },
    {
      scenario: 'S7',
      target: '1 database query per expiry under the burst',
      measured: bursts.map((row) => `${row.phase}: ${row.databaseQueries}`).join('; '),
      met: bursts.every((row) => row.databaseQueries === 1),
    },
  ];
  return { tables: [throughputTable, burstTable], targets, data: { throughput, bursts } };
}
