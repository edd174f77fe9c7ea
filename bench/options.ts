/** Command-line flags of `npm run bench -- ...`. */
export interface BenchOptions {
  /** Scenario ids to run, in the order of the scenario list. Empty: all. */
  readonly scenarios: readonly string[];
  /** Contender names to run (empty: all). For profiling one contender. */
  readonly contenders: readonly string[];
  readonly pods: number;
  readonly callers: number;
  readonly loaderMs: number;
  /** One OS process per pod. */
  readonly procs: boolean;
  /** Short smoke run: fewer pods and callers unless given, shorter windows. */
  readonly quick: boolean;
  /** Where the results go (`--out`); by default see {@link resultFiles}. */
  readonly outDir: string | undefined;
}

/** Where a run writes its results: a directory (relative to the repository root, or `--out`) and file names. */
export interface ResultFiles {
  readonly dir: string;
  readonly json: string;
  readonly markdown: string;
  readonly chart: string;
}

const DEFAULT_PODS = 8;
const DEFAULT_CALLERS = 250;
const DEFAULT_LOADER_MS = 100;

/**
 * Only a full run (every scenario and contender at the default sizes, in one process or with
 * --procs) replaces the committed results in bench/results; a --quick or partial run writes the
 * git-ignored .bench-results/ instead, unless --out names a directory.
 */
export function resultFiles(options: BenchOptions): ResultFiles {
  const full =
    !options.quick &&
    options.scenarios.length === 0 &&
    options.contenders.length === 0 &&
    options.pods === DEFAULT_PODS &&
    options.callers === DEFAULT_CALLERS &&
    options.loaderMs === DEFAULT_LOADER_MS;
  const suffix = options.procs ? '-procs' : '';
  return {
    dir: options.outDir ?? (full ? 'bench/results' : '.bench-results'),
    json: `latest${suffix}.json`,
    markdown: `latest${suffix}.md`,
    chart: `expiry-storm${suffix}.svg`,
  };
}

const USAGE = `usage: node .bench-build/bench/run.js [flags]
  --scenario S1,S3     run only these scenarios (default: all)
  --pods K             pods per cluster (default 8; --quick: 3)
  --callers C          concurrent callers per pod in a herd (default 250; --quick: 50)
  --loader-ms N        backend delay of one loader call in S1-S3 and S6 (default 100)
  --procs              one OS process per pod (loader calls counted with a Redis INCR)
  --quick              short smoke run
  --contenders a,b     only these contenders (names as in the tables)
  --out DIR            results directory (default: bench/results for a full run,
                       .bench-results for --quick or a partial run)
  --help`;

export function parseOptions(argv: readonly string[]): BenchOptions | 'help' {
  const values = new Map<string, string>();
  const flags = new Set<string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith('--'))
      throw new Error(`unexpected argument ${JSON.stringify(arg)}\n${USAGE}`);
    const [name, inline] = arg.slice(2).split('=', 2) as [string, string | undefined];
    if (['procs', 'quick', 'help'].includes(name)) {
      flags.add(name);
      continue;
    }
    if (
      !['scenario', 'scenarios', 'pods', 'callers', 'loader-ms', 'contenders', 'out'].includes(name)
    ) {
      throw new Error(`unknown flag --${name}\n${USAGE}`);
    }
    const value = inline ?? argv[++i];
    if (value === undefined) throw new Error(`--${name} needs a value\n${USAGE}`);
    values.set(name === 'scenarios' ? 'scenario' : name, value);
  }
  if (flags.has('help')) return 'help';
  const quick = flags.has('quick');
  return {
    scenarios: list(values.get('scenario')).map((id) => id.toUpperCase()),
    contenders: list(values.get('contenders')),
    pods: positiveInt('pods', values.get('pods'), quick ? 3 : DEFAULT_PODS),
    callers: positiveInt('callers', values.get('callers'), quick ? 50 : DEFAULT_CALLERS),
    loaderMs: positiveInt('loader-ms', values.get('loader-ms'), DEFAULT_LOADER_MS),
    procs: flags.has('procs'),
    quick,
    outDir: values.get('out'),
  };
}

export { USAGE };

function list(value: string | undefined): string[] {
  return (value ?? '')
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item.length > 0);
}

function positiveInt(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 1)
    throw new Error(`--${name} expects a positive integer, got ${value}`);
  return parsed;
}
