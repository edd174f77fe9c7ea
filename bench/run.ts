/**
 * herd-guard benchmark (issue 6): `npm run bench` compiles with tsconfig.bench.json and runs this
 * file. It starts its own redis-server on a free loopback port, runs the scenarios of
 * bench/scenarios/index.ts against every contender of bench/contenders.ts, prints markdown tables
 * on stdout (progress on stderr) and writes them with the raw numbers and the chart: a full run to
 * bench/results (latest.md, latest.json, expiry-storm.svg; `-procs` names with --procs), a --quick
 * or partial run to the git-ignored .bench-results/ (see `resultFiles`). Flags: see `--help`.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { RedisServer } from '../test/helpers/redis-server.js';
import { CONTENDERS, HERD_GUARD_REDIS } from './contenders.js';
import { type ClusterHost, LocalHost, ProcessHost } from './harness/cluster.js';
import { pinToOneCpu } from './harness/cpu-affinity.js';
import { renderTable, type Table } from './harness/markdown.js';
import { renderChart } from './harness/svg-chart.js';
import { type BenchOptions, parseOptions, resultFiles, USAGE } from './options.js';
import { SCENARIOS } from './scenarios/index.js';
import {
  type ChartData,
  type ScenarioContext,
  type ScenarioOutcome,
  type TargetCheck,
} from './scenarios/scenario.js';

/** The chart shows the first of these scenarios that ran. */
const CHART_PREFERENCE = ['S4', 'S3'];
/** The repository root (this file runs from .bench-build/bench/). */
const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

async function main(): Promise<void> {
  const parsed = parseOptions(process.argv.slice(2));
  if (parsed === 'help') {
    console.log(USAGE);
    return;
  }
  const options = parsed;
  const scenarios = selectScenarios(options);
  const contenders =
    options.contenders.length === 0
      ? CONTENDERS
      : CONTENDERS.filter((c) => options.contenders.includes(c.name));
  if (contenders.length === 0)
    throw new Error(`no contender matches --contenders ${options.contenders.join(',')}`);
  const files = resultFiles(options);
  // --out is relative to where the command runs; the defaults to the repository root.
  const outDir = options.outDir === undefined ? join(REPO_ROOT, files.dir) : resolve(files.dir);
  /** Everything printed on stdout, written to the markdown file at the end. */
  const report: string[] = [];
  const print = (text: string): void => {
    console.log(text);
    report.push(text);
  };

  const redis = await RedisServer.start();
  const runId = Date.now().toString(36);
  let namespaces = 0;
  const freshNamespace = (label: string): string =>
    `b${runId}.${++namespaces}.${label}`.slice(0, 64);
  const host: ClusterHost = options.procs
    ? new ProcessHost(redis.url, options.pods)
    : new LocalHost(redis.url, options.pods);
  const startedAt = Date.now();
  const progress = (line: string): void => {
    process.stderr.write(
      `[${((Date.now() - startedAt) / 1000).toFixed(1).padStart(6)} s] ${line}\n`,
    );
  };
  const context: ScenarioContext = {
    options,
    redisUrl: redis.url,
    contenders,
    openCluster: (contender, scenarioId) =>
      host.open(contender, freshNamespace(`${scenarioId}.${contender.name}`)),
    freshNamespace,
    progress,
    pinToOneCpu: () => pinToOneCpu([process.pid, redis.pid]),
    freezeRedis: () => redis.freeze(),
    thawRedis: () => {
      if (redis.isFrozen) redis.thaw();
    },
    redisCommands: async () => {
      const stats = await redis.commandStats();
      // The harness's own commands: INFO (this call), the --procs loader counter.
      for (const own of ['info', 'incr', 'getdel']) delete stats[own];
      return stats;
    },
  };

  const redisVersion = await redisServerVersion(redis);
  print(header(options, redisVersion, host.mode));
  const outcomes: Array<{ id: string; title: string; outcome: ScenarioOutcome }> = [];
  try {
    for (const scenario of scenarios) {
      progress(`${scenario.id} ${scenario.title}`);
      const outcome = await scenario.run(context);
      outcomes.push({ id: scenario.id, title: scenario.title, outcome });
      for (const table of outcome.tables) print(`\n${renderTable(table)}`);
    }
  } finally {
    // A scenario that failed with Redis frozen must not leave the pods' goodbyes hanging.
    context.thawRedis();
    await host.shutdown();
    await redis.stop();
  }

  const targets = outcomes.flatMap(({ outcome }) => outcome.targets);
  print(`\n${renderTable(summaryTable(options, targets))}`);

  mkdirSync(outDir, { recursive: true });
  const jsonPath = join(outDir, files.json);
  writeFileSync(
    jsonPath,
    `${JSON.stringify(
      {
        startedAt: new Date(startedAt).toISOString(),
        durationS: (Date.now() - startedAt) / 1000,
        environment: {
          node: process.version,
          platform: `${process.platform} ${process.arch}`,
          cpus: cpus().length,
          cpuModel: cpus()[0]?.model,
          redis: redisVersion,
        },
        options,
        mode: host.mode,
        contenders: contenders.map((c) => ({ name: c.name, description: c.description })),
        scenarios: Object.fromEntries(
          outcomes.map(({ id, title, outcome }) => [id, { title, ...asJson(outcome) }]),
        ),
        targets,
      },
      // Microsecond precision is plenty and keeps the file small.
      (_key, value: unknown) =>
        typeof value === 'number' && !Number.isInteger(value) ? Number(value.toFixed(3)) : value,
      2,
    )}\n`,
  );
  const chart = CHART_PREFERENCE.map((id) => outcomes.find((o) => o.id === id)?.outcome.chart).find(
    (c): c is ChartData => c !== undefined,
  );
  const markdownPath = join(outDir, files.markdown);
  writeFileSync(markdownPath, `${report.join('\n')}\n`);
  const written = [markdownPath, jsonPath];
  if (chart !== undefined) {
    const svgPath = join(outDir, files.chart);
    writeFileSync(svgPath, renderChart(chart, HERD_GUARD_REDIS));
    written.push(svgPath);
  }
  console.log(
    `\nWrote ${written.join(', ')}.${chart === undefined ? ' (No chart: run S4 or S3 for it.)' : ''}`,
  );
  progress(`done in ${((Date.now() - startedAt) / 1000).toFixed(1)} s`);
}

function selectScenarios(options: BenchOptions): typeof SCENARIOS {
  if (options.scenarios.length === 0) return SCENARIOS;
  const unknown = options.scenarios.filter(
    (id) => !SCENARIOS.some((scenario) => scenario.id === id),
  );
  if (unknown.length > 0) {
    throw new Error(
      `unknown scenario ${unknown.join(', ')}; known: ${SCENARIOS.map((s) => s.id).join(', ')}`,
    );
  }
  return SCENARIOS.filter((scenario) => options.scenarios.includes(scenario.id));
}

function header(options: BenchOptions, redisVersion: string, mode: string): string {
  return [
    '## herd-guard benchmark',
    '',
    `- ${options.pods} pods x ${options.callers} callers, loader ${options.loaderMs} ms, pods ${mode === 'processes' ? 'in one OS process each (--procs)' : 'in one process'}${options.quick ? ', quick run' : ''}`,
    `- Node ${process.version}, ${cpus().length} CPUs (${cpus()[0]?.model ?? 'unknown'}), redis-server ${redisVersion} (private, started by the bench)`,
    `- contenders: ${CONTENDERS.filter(
      (c) => options.contenders.length === 0 || options.contenders.includes(c.name),
    )
      .map((c) => `\`${c.name}\` (${c.description})`)
      .join('; ')}`,
  ].join('\n');
}

function summaryTable(options: BenchOptions, targets: readonly TargetCheck[]): Table {
  const met = targets.filter((target) => target.met).length;
  const defaults =
    options.pods === 8 && options.callers === 250 && options.loaderMs === 100 && !options.quick;
  return {
    title: `Targets for ${HERD_GUARD_REDIS}: ${met} of ${targets.length} met`,
    headers: ['scenario', 'target', 'measured', 'met'],
    align: ['left', 'left', 'left', 'left'],
    rows: targets.map((target) => [
      target.scenario,
      target.target,
      target.measured,
      target.met ? 'met' : '**not met**',
    ]),
    notes: defaults
      ? []
      : [
          'The targets are stated for 8 pods x 250 callers, loader 100 ms; this run used other settings.',
        ],
  };
}

async function redisServerVersion(server: RedisServer): Promise<string> {
  const client = server.client({ lazyConnect: true });
  try {
    await client.connect();
    const info = await client.info('server');
    return /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown';
  } finally {
    client.disconnect();
  }
}

function asJson(outcome: ScenarioOutcome): Record<string, unknown> {
  return {
    tables: outcome.tables,
    targets: outcome.targets,
    data: outcome.data,
    chart: outcome.chart,
  };
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
