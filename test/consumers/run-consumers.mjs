/**
 * `npm run test:package` and `npm run test:matrix`: herd-guard as an application gets it from npm.
 *
 * 1. `npm pack` (which builds through the `prepare` script) into a temp dir, then checks the
 *    tarball: entry points, declarations, source maps that resolve, attw and publint.
 * 2. For each consumer app in this folder: a copy in the temp dir depends on the tarball and is
 *    installed from the npm registry with no optional peer (no ioredis, prom-client or
 *    @nestjs/terminus), type-checked with `skipLibCheck: false`, and runs its own unit and e2e
 *    tests; the same at the lowest versions the peer ranges admit; then, for each set of optional
 *    peers in `CONSUMERS`, the peers are added and it type-checks again and runs its Redis tests
 *    against a redis-server started here.
 *
 * `--quick` (test:package, part of `npm test`) runs the tarball checks and each app's first run;
 * `--matrix` (test:matrix) runs every other run; with neither, everything runs. App names as
 * arguments narrow it to those apps.
 *
 * Nothing is written into the repository; the temp dir is removed at the end
 * (HERD_GUARD_KEEP_CONSUMERS=1 keeps it for a look).
 */
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkUnpackedPackage } from './check-tarball.mjs';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const HERE = fileURLToPath(new URL('.', import.meta.url));

/** Optional peers: none of them is installed for an app's first run. */
const OPTIONAL_PEERS = ['ioredis', 'prom-client', '@nestjs/terminus'];

/**
 * What each app is run with, in order, every version exact. `quick` is the app's own package.json
 * (the latest Nest of its major) with no optional peer. `matrix` first moves Nest,
 * reflect-metadata and rxjs to the lowest versions the peer ranges admit, then adds the optional
 * peers and runs the Redis tests. Together they cover the peer ranges of package.json: Nest 11
 * and 12, reflect-metadata 0.1 and 0.2, rxjs 7, ioredis 5 and 6, prom-client 15, each at its
 * lowest admitted version and its latest.
 */
const CONSUMERS = [
  {
    dir: 'nest11-cjs',
    quick: [memoryOnly('latest Nest 11', {})],
    matrix: [
      memoryOnly('lowest versions, Nest 11', lowest('11.0.0')),
      withPeers({ ioredis: '5.3.0', 'prom-client': '15.0.0', '@nestjs/terminus': '11.1.1' }),
      withPeers({ ioredis: '6.0.0', 'prom-client': '15.1.3', '@nestjs/terminus': '11.1.1' }),
    ],
  },
  {
    dir: 'nest12-esm',
    quick: [memoryOnly('latest Nest 12', {})],
    matrix: [
      memoryOnly('lowest versions, Nest 12', lowest('12.0.1')),
      withPeers({ ioredis: '5.11.1', 'prom-client': '15.1.3', '@nestjs/terminus': '12.1.0' }),
      withPeers({ ioredis: '6.0.0', 'prom-client': '15.1.3', '@nestjs/terminus': '12.1.0' }),
    ],
  },
];

/** The lowest versions the peer ranges admit for a Nest major (Nest's own peers at their floors too). */
function lowest(nestVersion) {
  return {
    '@nestjs/common': nestVersion,
    '@nestjs/core': nestVersion,
    '@nestjs/platform-express': nestVersion,
    '@nestjs/testing': nestVersion,
    'reflect-metadata': '0.1.12',
    rxjs: '7.5.5',
  };
}

/** No optional peer installed: the app's type-check (src and its tests), unit and e2e tests. */
function memoryOnly(label, versions) {
  return {
    label: `${label}, no optional peer`,
    versions,
    absent: OPTIONAL_PEERS,
    tsconfig: 'tsconfig.check.json',
    scripts: ['test', 'test:e2e'],
  };
}

/** The optional peers added: the type-check now covers the Redis tests, which run on a redis-server. */
function withPeers(versions) {
  const label = Object.entries(versions)
    .map(([name, version]) => `${name}@${version}`)
    .join(' ');
  return {
    label,
    versions,
    absent: [],
    tsconfig: 'tsconfig.check-redis.json',
    scripts: ['test:redis'],
  };
}

const { sets, only } = parseArguments(process.argv.slice(2));
const startedAt = Date.now();
const work = mkdtempSync(join(tmpdir(), 'herd-guard-consumers-'));
let redis;

try {
  const tarball = step('npm pack (builds through prepare)', () => pack(work));
  if (sets.includes('quick')) checkTarball(tarball, work);
  for (const consumer of CONSUMERS.filter((c) => only.length === 0 || only.includes(c.dir))) {
    const app = join(work, consumer.dir);
    cpSync(join(HERE, consumer.dir), app, {
      recursive: true,
      filter: (source) => !/[\\/](node_modules|dist|coverage)$/.test(source),
    });
    const manifest = JSON.parse(readFileSync(join(app, 'package.json'), 'utf8'));
    for (const { label, versions, absent, tsconfig, scripts } of sets.flatMap(
      (set) => consumer[set],
    )) {
      const title = `${consumer.dir} (${label})`;
      step(`${title}: npm install`, () =>
        install(app, manifest, { 'herd-guard': `file:${tarball}`, ...versions }),
      );
      if (absent.length > 0) step(`${title}: not installed`, () => assertAbsent(app, absent));
      step(`${title}: tsc -p ${tsconfig} (skipLibCheck false)`, () => typecheck(app, tsconfig));
      if (scripts.includes('test:redis')) redis ??= await startRedis(work);
      const env = { ...process.env, REDIS_URL: redis?.url };
      if (env.REDIS_URL === undefined) delete env.REDIS_URL;
      for (const script of scripts) {
        step(`${title}: npm run ${script}`, () =>
          run('npm', ['run', script, '--silent'], { cwd: app, env }),
        );
      }
    }
  }
  console.log(`\nconsumer checks passed in ${seconds(Date.now() - startedAt)}`);
} finally {
  redis?.stop();
  if (process.env.HERD_GUARD_KEEP_CONSUMERS === '1') console.log(`kept ${work}`);
  else rmSync(work, { recursive: true, force: true });
}

/** `--quick`, `--matrix` or neither (both sets), then app names (none: every app). */
function parseArguments(args) {
  const apps = CONSUMERS.map((c) => c.dir);
  const flags = args.filter((arg) => arg.startsWith('--'));
  const only = args.filter((arg) => !arg.startsWith('--'));
  const valid =
    flags.length <= 1 &&
    flags.every((flag) => flag === '--quick' || flag === '--matrix') &&
    only.every((name) => apps.includes(name));
  if (!valid) {
    throw new Error(
      `usage: run-consumers.mjs [--quick | --matrix] [${apps.join(' ')}]; got: ${args.join(' ')}`,
    );
  }
  return { sets: flags.length === 0 ? ['quick', 'matrix'] : [flags[0].slice(2)], only };
}

function checkTarball(tarball, dir) {
  step('tarball: entry points, declarations, source maps', () => {
    const unpacked = join(dir, 'unpacked');
    mkdirSync(unpacked);
    run('tar', ['-xzf', tarball, '-C', unpacked]);
    const { files, maps } = checkUnpackedPackage(join(unpacked, 'package'));
    return `${files} files, ${maps} source maps resolve`;
  });
  step('attw (are the types wrong)', () =>
    run(bin('attw'), [tarball, '--format', 'table-flipped'], { cwd: ROOT }),
  );
  step('publint', () => publint(tarball));
}

function step(title, action) {
  const began = Date.now();
  process.stdout.write(`\n▶ ${title}\n`);
  const detail = action();
  console.log(
    `✔ ${title} (${seconds(Date.now() - began)})${typeof detail === 'string' ? `: ${detail}` : ''}`,
  );
  return detail;
}

function pack(destination) {
  const output = run('npm', ['pack', '--json', '--pack-destination', destination], {
    cwd: ROOT,
    quiet: true,
  });
  // npm prints the prepare script's output before the JSON report.
  const [{ filename }] = JSON.parse(output.slice(output.indexOf('[\n')));
  return join(destination, filename);
}

function publint(tarball) {
  const output = run(bin('publint'), ['run', tarball, '--strict'], { cwd: ROOT, quiet: true });
  process.stdout.write(output);
  // publint exits 0 on suggestions; a clean package prints none.
  if (!/All good!/.test(output)) throw new Error('publint reported suggestions (see above)');
}

/** Installs the app's package.json with `versions` laid over its dependencies (or added to them). */
function install(app, manifest, versions) {
  const dependencies = { ...manifest.dependencies };
  const devDependencies = { ...manifest.devDependencies };
  for (const [name, version] of Object.entries(versions)) {
    if (name in devDependencies) devDependencies[name] = version;
    else dependencies[name] = version;
  }
  writeFileSync(
    join(app, 'package.json'),
    `${JSON.stringify({ ...manifest, dependencies, devDependencies }, null, 2)}\n`,
  );
  run('npm', ['install', '--no-audit', '--no-fund', '--no-package-lock', '--loglevel=error'], {
    cwd: app,
  });
}

function assertAbsent(app, names) {
  const requireFromApp = createRequire(join(app, 'package.json'));
  const present = names.filter((name) => {
    try {
      requireFromApp.resolve(`${name}/package.json`);
      return true;
    } catch {
      return false;
    }
  });
  if (present.length > 0)
    throw new Error(`${present.join(', ')} resolvable from ${app}: the run would prove nothing`);
  return `${names.join(', ')} not installed`;
}

function typecheck(app, config) {
  run(join(app, 'node_modules', '.bin', 'tsc'), ['-p', config], { cwd: app });
}

function bin(name) {
  return join(ROOT, 'node_modules', '.bin', name);
}

/** Runs a command; its output goes to the terminal, or is returned with `quiet` (and shown if it fails). */
function run(command, args, { cwd = ROOT, env = process.env, quiet = false } = {}) {
  try {
    return execFileSync(command, args, {
      cwd,
      env,
      encoding: 'utf8',
      stdio: quiet ? ['ignore', 'pipe', 'pipe'] : 'inherit',
      maxBuffer: 64 * 1024 * 1024,
    });
  } catch (error) {
    if (quiet) process.stderr.write(`${error.stdout ?? ''}${error.stderr ?? ''}`);
    throw new Error(`${command} ${args.join(' ')} failed in ${cwd} (exit ${error.status})`, {
      cause: error,
    });
  }
}

/** One throwaway redis-server on a free loopback port (never the machine's 6379), no persistence. */
async function startRedis(dir) {
  const port = await freePort();
  const child = spawn(
    'redis-server',
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const stop = () => child.kill('SIGKILL');
  process.on('exit', stop);
  let log = '';
  await new Promise((resolve, reject) => {
    const onOutput = (chunk) => {
      log += chunk;
      if (log.includes('Ready to accept connections')) resolve();
    };
    child.stdout.on('data', onOutput);
    child.stderr.on('data', onOutput);
    child.once('error', (error) =>
      reject(
        new Error(
          `cannot start redis-server (install it: apt-get install redis-server): ${error.message}`,
        ),
      ),
    );
    child.once('exit', (code) => reject(new Error(`redis-server exited with ${code}:\n${log}`)));
  });
  return { url: `redis://127.0.0.1:${port}`, stop };
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

function seconds(ms) {
  return `${(ms / 1000).toFixed(1)} s`;
}
