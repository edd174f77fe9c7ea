/**
 * Throwaway redis-server processes for integration tests: each on its own free loopback port,
 * with no persistence, a private temp dir, and a known pid so a test can kill, restart, freeze
 * or thaw it. The machine's own Redis (127.0.0.1:6379) is never used.
 *
 * A missing redis-server makes the tests fail with an install hint; they never skip.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import {
  accessSync,
  constants as fsConstants,
  existsSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { rm } from 'node:fs/promises';
import { createConnection, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';

const LOOPBACK = '127.0.0.1';
/** The port of the machine's own Redis, which the tests must leave alone. */
const MACHINE_REDIS_PORT = 6379;
/** Redis Cluster opens its bus on the data port + 10000. */
const CLUSTER_BUS_PORT_OFFSET = 10_000;
const MAX_PORT = 65_535;
const CLUSTER_NODE_COUNT = 3;
const CLUSTER_NODE_TIMEOUT_MS = 2_000;

const READY_TIMEOUT_MS = 10_000;
const CLUSTER_READY_TIMEOUT_MS = 20_000;
const STOP_TIMEOUT_MS = 5_000;
const ADMIN_COMMAND_TIMEOUT_MS = 2_000;
const POLL_INTERVAL_MS = 20;
/** Attempts at a fresh port when another process takes the one we picked before redis binds it. */
const START_ATTEMPTS = 5;
const PORT_PICK_ATTEMPTS = 100;
/** Only the tail of redis-server's log is kept, for error messages. */
const OUTPUT_LIMIT_CHARS = 16_000;

const INSTALL_HINT =
  'The integration tests need a real Redis 7 (redis-server and redis-cli on PATH). Install it with ' +
  '`sudo apt-get install redis-server` (Debian/Ubuntu), `brew install redis` (macOS) or ' +
  '`sudo dnf install redis` (Fedora), then run the tests again.';

/*
 * Safety nets so that no redis-server outlives the test process. Written by `launch` and the
 * child's exit handler; read by `stopAllRedisServers` and the process exit handler.
 */
const servers = new Set<RedisServer>();
const clients = new Set<Redis | Cluster>();
const livePids = new Set<number>();
const tempDirs = new Set<string>();

// Fires for plain Node scripts (bench/, sample/). Under Jest each test file gets a copy of
// `process` whose 'exit' never fires, which is why every server also has a watchdog (see `launch`).
process.on('exit', () => {
  for (const pid of livePids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});

export interface RedisServerOptions {
  /** Extra redis-server config as command-line args, e.g. `['--notify-keyspace-events', 'KEA']`. */
  readonly args?: readonly string[];
  /**
   * Start as a Redis Cluster node: adds `--cluster-enabled yes`, a `nodes.conf` in the temp dir
   * and `--cluster-node-timeout 2000`, and picks a port whose bus port (+10000) is free too.
   */
  readonly cluster?: boolean;
  /** Cluster node timeout in ms (default 2000): how long a failed master goes unnoticed. */
  readonly clusterNodeTimeoutMs?: number;
  /** Start as a replica of this server (`--replicaof`). */
  readonly replicaOf?: RedisNodeAddress;
  /** Start as a Sentinel (`redis-server <config> --sentinel`) watching this master. */
  readonly sentinel?: SentinelOptions;
}

/** What a Sentinel watches, and how quickly it fails the master over. */
export interface SentinelOptions {
  readonly masterName: string;
  readonly master: RedisNodeAddress;
  /** Sentinels that must agree the master is down. */
  readonly quorum: number;
  readonly downAfterMs: number;
  readonly failoverTimeoutMs: number;
}

export interface RedisNodeAddress {
  readonly host: string;
  readonly port: number;
}

/** Absolute path of `redis-server` on `searchPath`; throws an install hint when it is missing. */
export function findRedisServer(searchPath: string = process.env.PATH ?? ''): string {
  return findExecutable('redis-server', searchPath);
}

/** Absolute path of `redis-cli` on `searchPath` (needed to form a cluster); throws an install hint when missing. */
export function findRedisCli(searchPath: string = process.env.PATH ?? ''): string {
  return findExecutable('redis-cli', searchPath);
}

/** One redis-server child process on a fixed loopback port; survives kill/restart cycles on that port. */
export class RedisServer {
  readonly host = LOOPBACK;

  /** Written by `launch` (start/restart) and by the child's exit handler. */
  private current: RunningRedis | undefined;
  /** Written by freeze/thaw and cleared when the process exits. */
  private frozen = false;

  private constructor(
    private readonly binary: string,
    readonly port: number,
    /** The `--dir` of every process this server runs; kept across restarts (a cluster node keeps its nodes.conf). */
    private readonly dir: string,
    private readonly options: RedisServerOptions,
  ) {}

  /** Starts a redis-server on a free loopback port and resolves once it answers PING. */
  static async start(options: RedisServerOptions = {}): Promise<RedisServer> {
    const binary = findRedisServer();
    let lastFailure: StartFailure | undefined;
    for (let attempt = 0; attempt < START_ATTEMPTS; attempt++) {
      const port = await pickFreePort(options.cluster ?? false);
      const dir = mkdtempSync(join(tmpdir(), 'herd-guard-redis-'));
      tempDirs.add(dir);
      const server = new RedisServer(binary, port, dir, options);
      try {
        await server.launch();
        return server;
      } catch (error) {
        servers.delete(server);
        tempDirs.delete(dir);
        await rm(dir, { recursive: true, force: true });
        // Another process took the port between our probe and redis binding it: pick another.
        if (!(error instanceof StartFailure) || !error.portTaken) throw error;
        lastFailure = error;
      }
    }
    throw new Error(`redis-server could not find a free port in ${START_ATTEMPTS} attempts`, {
      cause: lastFailure,
    });
  }

  get url(): string {
    return `redis://${this.host}:${this.port}`;
  }

  /** Pid of the running redis-server; throws when it is stopped. */
  get pid(): number {
    if (!this.current || this.current.exited)
      throw new Error(`redis-server on port ${this.port} is not running`);
    return this.current.pid;
  }

  get running(): boolean {
    return this.current !== undefined && !this.current.exited;
  }

  get isFrozen(): boolean {
    return this.frozen;
  }

  /** Graceful shutdown (SIGTERM; nothing is saved), then waits for the process to exit. No-op when stopped. */
  async stop(): Promise<void> {
    const running = this.current;
    if (!running || running.exited) return;
    // A stopped (SIGSTOP) process would hold SIGTERM until it is continued.
    if (this.frozen) this.thaw();
    running.child.kill('SIGTERM');
    if (!(await exitsWithin(running, STOP_TIMEOUT_MS))) {
      running.child.kill('SIGKILL');
      await running.exitedPromise;
    }
  }

  /** SIGKILL, like a crash, then waits for the process to exit. No-op when stopped. */
  async kill(): Promise<void> {
    const running = this.current;
    if (!running || running.exited) return;
    running.child.kill('SIGKILL');
    await running.exitedPromise;
  }

  /** Starts redis-server again on the same port (stopping it first if running) and waits until it answers. */
  async restart(): Promise<void> {
    await this.stop();
    try {
      await this.launch();
    } catch (error) {
      if (error instanceof StartFailure && error.portTaken) {
        throw new Error(
          `cannot restart redis-server: port ${this.port} was taken by another process`,
          {
            cause: error,
          },
        );
      }
      throw error;
    }
  }

  /** SIGSTOP: the server keeps its connections but answers nothing until `thaw()`. */
  freeze(): void {
    process.kill(this.pid, 'SIGSTOP');
    this.frozen = true;
  }

  /** SIGCONT: a frozen server answers again, queued commands included. */
  thaw(): void {
    process.kill(this.pid, 'SIGCONT');
    this.frozen = false;
  }

  /** Freezes the server for `durationMs`, then thaws it (if it is still running). */
  async pause(durationMs: number): Promise<void> {
    this.freeze();
    try {
      await new Promise((resolve) => setTimeout(resolve, durationMs));
    } finally {
      if (this.running && this.frozen) this.thaw();
    }
  }

  /** A new ioredis client to this server; the caller closes it (`stopAllRedisServers` closes leftovers). */
  client(options: RedisOptions = {}): Redis {
    return track(new Redis({ ...options, host: this.host, port: this.port }));
  }

  /**
   * `INFO commandstats` as command -> calls, e.g. `{ get: 12, evalsha: 3, 'config|get': 1 }`.
   * Commands never called are absent. The helper's own calls show up as `info` and `config|resetstat`.
   */
  async commandStats(): Promise<Record<string, number>> {
    const info = await sendCommand(this.port, ['INFO', 'commandstats']);
    const stats: Record<string, number> = {};
    for (const match of String(info).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
      stats[match[1]!] = Number(match[2]);
    }
    return stats;
  }

  /** CONFIG RESETSTAT: zeroes the counters `commandStats()` reads. */
  async resetStats(): Promise<void> {
    await sendCommand(this.port, ['CONFIG', 'RESETSTAT']);
  }

  /**
   * Sends one admin command on a connection of its own (no HELLO, nothing added to the stats but
   * the command itself) and resolves its reply; a reply error rejects.
   */
  command(...args: string[]): Promise<Reply> {
    return sendCommand(this.port, args);
  }

  /** `INFO <section>` as field -> value, e.g. `info('replication')` gives `{ role: 'master', ... }`. */
  async info(section: string): Promise<Record<string, string>> {
    const text = String(await sendCommand(this.port, ['INFO', section]));
    const fields: Record<string, string> = {};
    for (const match of text.matchAll(/^([a-z_0-9]+):(.*?)\r?$/gm)) fields[match[1]!] = match[2]!;
    return fields;
  }

  /** `master` or `slave`, from INFO replication. */
  async role(): Promise<string> {
    return (await this.info('replication'))['role'] ?? 'unknown';
  }

  /** The clients connected now, from CLIENT LIST (the helper's own connection excluded). */
  async clientList(): Promise<Array<Record<string, string>>> {
    const text = String(await sendCommand(this.port, ['CLIENT', 'LIST']));
    return text
      .split('\n')
      .filter((line) => line.trim() !== '')
      .map((line) => Object.fromEntries(line.trim().split(' ').map(splitField)))
      .filter((client) => client['cmd'] !== 'client|list');
  }

  private async launch(): Promise<void> {
    servers.add(this);
    tempDirs.add(this.dir);
    mkdirSync(this.dir, { recursive: true }); // gone if stopAllRedisServers ran before a restart
    const { sentinel, replicaOf } = this.options;
    const args = [
      ...(sentinel === undefined ? [] : [sentinelConfig(this.dir, sentinel), '--sentinel']),
      ...['--port', String(this.port), '--bind', LOOPBACK, '--daemonize', 'no'],
      ...['--save', '', '--appendonly', 'no', '--dir', this.dir],
      // A replica syncs at once (Redis waits 5 s by default for more replicas to join the sync).
      ...['--repl-diskless-sync-delay', '0'],
      ...(this.options.cluster ? clusterArgs(this.dir, this.options.clusterNodeTimeoutMs) : []),
      ...(replicaOf === undefined ? [] : ['--replicaof', replicaOf.host, String(replicaOf.port)]),
      ...(this.options.args ?? []),
    ];
    const running = spawnRedis(this.binary, args, this.dir);
    this.current = running;
    void running.exitedPromise.then(() => {
      if (this.current === running) this.frozen = false;
    });
    await waitUntilReady(running, this.port);
  }
}

export interface ClusterFixtureOptions extends Pick<RedisServerOptions, 'args'> {
  /** Replicas per master (default 0): 3 masters and 3 x `replicas` replicas. */
  readonly replicas?: number;
  /** Cluster node timeout in ms (default 2000): a failed master is replaced after about this. */
  readonly nodeTimeoutMs?: number;
}

/** Three redis-server cluster masters sharing the 16384 slots, with replicas if asked. */
export class RedisClusterFixture {
  private constructor(readonly servers: readonly RedisServer[]) {}

  /**
   * Starts the nodes, joins them with `redis-cli --cluster create`, and waits for
   * `cluster_state:ok` on each and every replica's link to its master.
   */
  static async start(options: ClusterFixtureOptions = {}): Promise<RedisClusterFixture> {
    const cli = findRedisCli();
    const replicas = options.replicas ?? 0;
    const started: RedisServer[] = [];
    try {
      // One at a time, so a node's ports are bound before the next one probes for free ports.
      for (let i = 0; i < CLUSTER_NODE_COUNT * (1 + replicas); i++) {
        const node = {
          args: options.args,
          cluster: true,
          clusterNodeTimeoutMs: options.nodeTimeoutMs,
        };
        started.push(await RedisServer.start(node));
      }
      await createCluster(cli, started, replicas);
      await waitForClusterOk(started, started.length);
      await pollUntil(
        async () => (await Promise.all(started.map(isSyncedOrMaster))).every(Boolean),
        'every replica synced with its master',
      );
    } catch (error) {
      await Promise.all(started.map((server) => server.kill()));
      throw error;
    }
    return new RedisClusterFixture(started);
  }

  /** Seed addresses for `new Cluster(fixture.nodes)`. */
  get nodes(): RedisNodeAddress[] {
    return this.servers.map((server) => ({ host: server.host, port: server.port }));
  }

  /** A new ioredis Cluster client; the caller closes it (`stopAllRedisServers` closes leftovers). */
  client(options: ClusterOptions = {}): Cluster {
    return track(new Cluster(this.nodes, options));
  }

  /** The running nodes that are masters now. */
  async masters(): Promise<RedisServer[]> {
    const running = this.servers.filter((server) => server.running);
    const roles = await Promise.all(running.map((server) => server.role()));
    return running.filter((_, i) => roles[i] === 'master');
  }

  /** The running master that serves `key`'s slot now (CLUSTER KEYSLOT, CLUSTER SLOTS). */
  async masterOf(key: string): Promise<RedisServer> {
    const node = this.servers.find((server) => server.running);
    if (node === undefined) throw new Error('no node of the cluster is running');
    const slot = Number(await node.command('CLUSTER', 'KEYSLOT', key));
    const ranges = (await node.command('CLUSTER', 'SLOTS')) as Reply[][];
    const range = ranges.find(([start, end]) => Number(start) <= slot && slot <= Number(end));
    const port = Number((range?.[2] as Reply[] | undefined)?.[1]);
    const master = this.servers.find((server) => server.port === port);
    if (master === undefined) throw new Error(`no master found for slot ${slot}`);
    return master;
  }

  /** The running replica of `master`. */
  async replicaOf(master: RedisServer): Promise<RedisServer> {
    for (const server of this.servers.filter((candidate) => candidate.running)) {
      const info = await server.info('replication');
      if (info['role'] === 'slave' && Number(info['master_port']) === master.port) return server;
    }
    throw new Error(`no running replica of the master on port ${master.port}`);
  }

  /**
   * `CLUSTER FAILOVER` on `replica` (a manual failover: its master stops taking writes, the
   * replica catches up and takes over), then waits until it is a master and the cluster is ok.
   */
  async failover(replica: RedisServer): Promise<void> {
    const master = await this.masterOfReplica(replica);
    await replica.command('CLUSTER', 'FAILOVER');
    await this.#tookOver(replica, master);
  }

  /** Kills `master` (SIGKILL) and waits until its replica has taken over and the cluster is ok. */
  async killMaster(master: RedisServer): Promise<RedisServer> {
    const replica = await this.replicaOf(master);
    await master.kill();
    await this.#tookOver(replica, master);
    return replica;
  }

  /** The master `replica` replicates. */
  async masterOfReplica(replica: RedisServer): Promise<RedisServer> {
    const port = Number((await replica.info('replication'))['master_port']);
    const master = this.servers.find((server) => server.port === port);
    if (master === undefined) throw new Error(`no master on port ${port}`);
    return master;
  }

  /** Waits until `replica` is a master, every running node says so, and the cluster is ok. */
  async #tookOver(replica: RedisServer, master: RedisServer): Promise<void> {
    await pollUntil(async () => (await replica.role()) === 'master', 'the replica promoted');
    const running = this.servers.filter((server) => server.running);
    await pollUntil(async () => {
      const views = await Promise.all(
        running.map((node) => node.command('CLUSTER', 'SLOTS') as Promise<Reply[][]>),
      );
      return views.every((ranges) =>
        ranges.every((range) => Number((range[2] as Reply[])[1]) !== master.port),
      );
    }, 'every node knowing the new master');
    await waitForClusterOk(running);
  }

  async stop(): Promise<void> {
    await Promise.all(this.servers.map((server) => server.stop()));
  }
}

export interface SentinelFixtureOptions {
  readonly masterName?: string;
  /** Sentinels (default 3; quorum is a majority of them). */
  readonly sentinels?: number;
  /** How long the primary must not answer before a Sentinel takes it for down (default 500). */
  readonly downAfterMs?: number;
  /** Sentinel's failover timeout (default 2000). */
  readonly failoverTimeoutMs?: number;
}

/**
 * A primary, one replica and Sentinels watching them, all local redis-server processes: ioredis
 * connects with `{ sentinels: fixture.sentinels, name: fixture.masterName }`.
 */
export class RedisSentinelFixture {
  private constructor(
    readonly masterName: string,
    /** The data nodes: the first primary first. */
    readonly servers: readonly RedisServer[],
    readonly sentinelServers: readonly RedisServer[],
  ) {}

  /**
   * Starts the primary, its replica (synced) and the Sentinels, and waits until every Sentinel
   * knows the replica and the other Sentinels.
   */
  static async start(options: SentinelFixtureOptions = {}): Promise<RedisSentinelFixture> {
    const masterName = options.masterName ?? 'herd';
    const count = options.sentinels ?? 3;
    const started: RedisServer[] = [];
    try {
      const primary = await RedisServer.start();
      started.push(primary);
      const replica = await RedisServer.start({ replicaOf: primary });
      started.push(replica);
      await pollUntil(() => isSyncedOrMaster(replica), 'the replica synced');
      const sentinel: SentinelOptions = {
        masterName,
        master: { host: primary.host, port: primary.port },
        quorum: Math.floor(count / 2) + 1,
        downAfterMs: options.downAfterMs ?? 500,
        failoverTimeoutMs: options.failoverTimeoutMs ?? 2_000,
      };
      const sentinels: RedisServer[] = [];
      for (let i = 0; i < count; i++) {
        const node = await RedisServer.start({ sentinel });
        started.push(node);
        sentinels.push(node);
      }
      const fixture = new RedisSentinelFixture(masterName, [primary, replica], sentinels);
      await pollUntil(async () => {
        const infos = await Promise.all(sentinels.map((node) => node.info('sentinel')));
        return infos.every(
          (info) =>
            /status=ok,.*slaves=1,sentinels=\d+/.test(info['master0'] ?? '') &&
            (info['master0'] ?? '').endsWith(`sentinels=${count}`),
        );
      }, 'every Sentinel knowing the replica and the other Sentinels');
      return fixture;
    } catch (error) {
      await Promise.all(started.map((server) => server.kill()));
      throw error;
    }
  }

  /** Where ioredis finds the Sentinels. */
  get sentinels(): RedisNodeAddress[] {
    return this.sentinelServers.map((node) => ({ host: node.host, port: node.port }));
  }

  /** The data node every running Sentinel names as the primary now (throws if they disagree). */
  async primary(): Promise<RedisServer> {
    const named = await Promise.all(
      this.sentinelServers
        .filter((node) => node.running)
        .map((node) => node.command('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', this.masterName)),
    );
    const ports = new Set(named.map((reply) => Number((reply as string[])[1])));
    const server = this.servers.find((candidate) => ports.size === 1 && ports.has(candidate.port));
    if (server === undefined)
      throw new Error(`the Sentinels disagree on the primary: ${[...ports]}`);
    return server;
  }

  /** The data node that is not `server`. */
  other(server: RedisServer): RedisServer {
    const found = this.servers.find((candidate) => candidate !== server);
    if (found === undefined) throw new Error('no other data node');
    return found;
  }

  /**
   * Waits until every running Sentinel names `server` as the primary, `server` is a master, and
   * the old primary, if it runs, replicates from it.
   */
  async promoted(server: RedisServer): Promise<void> {
    await pollUntil(async () => {
      const primary = await this.primary().catch(() => undefined);
      if (primary !== server || (await server.role()) !== 'master') return false;
      const old = this.other(server);
      return !old.running || ((await isSyncedOrMaster(old)) && (await old.role()) === 'slave');
    }, `the node on port ${server.port} promoted and known to every Sentinel`);
  }

  /**
   * `SENTINEL FAILOVER`: the replica is promoted without the primary failing. The Sentinels demote
   * the old primary only when they next poll it (every 10 s); this demotes it at once with the
   * same `REPLICAOF`, as a managed Redis does, so its clients get READONLY meanwhile.
   */
  async failover(): Promise<RedisServer> {
    const old = await this.primary();
    const next = this.other(old);
    await this.sentinelServers[0]!.command('SENTINEL', 'FAILOVER', this.masterName);
    await pollUntil(async () => {
      const named = await this.primary().catch(() => undefined);
      return named === next && (await next.role()) === 'master';
    }, `the node on port ${next.port} promoted`);
    await old.command('REPLICAOF', next.host, String(next.port));
    await this.promoted(next);
    return next;
  }

  /** Kills the primary (SIGKILL); the Sentinels notice and promote the replica. */
  async killPrimary(): Promise<RedisServer> {
    const primary = await this.primary();
    const next = this.other(primary);
    await primary.kill();
    await this.promoted(next);
    return next;
  }
}

/** Closes clients made by `client()`, kills every server this module started and removes their temp dirs. */
export async function stopAllRedisServers(): Promise<void> {
  // Clients first, so they do not start reconnect loops against the servers killed below.
  for (const client of clients) client.disconnect();
  clients.clear();
  const all = [...servers];
  servers.clear();
  await Promise.all(all.map((server) => server.kill()));
  const dirs = [...tempDirs];
  tempDirs.clear();
  await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true })));
}

// ---------------------------------------------------------------------------------------------
// Processes

interface RunningRedis {
  readonly child: ChildProcess;
  readonly pid: number;
  readonly exitedPromise: Promise<void>;
  /** Written once by the child's exit (or spawn error) handler. */
  exited: boolean;
  /** The tail of stdout + stderr; written by the stream handlers. */
  output: string;
}

class StartFailure extends Error {
  constructor(
    message: string,
    readonly portTaken: boolean,
  ) {
    super(message);
  }
}

function spawnRedis(binary: string, args: readonly string[], dir: string): RunningRedis {
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let markExited!: () => void;
  const running: RunningRedis = {
    child,
    pid: child.pid ?? -1,
    exitedPromise: new Promise<void>((resolve) => (markExited = resolve)),
    exited: false,
    output: '',
  };
  const collect = (chunk: Buffer): void => {
    running.output = (running.output + chunk.toString('utf8')).slice(-OUTPUT_LIMIT_CHARS);
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);

  // If the test process dies without stopping the server (a crashed Jest worker, a forgotten
  // stop), the watchdog's stdin reaches EOF and it kills redis and removes the temp dir.
  const watchdog =
    child.pid === undefined
      ? undefined
      : spawn(
          'sh',
          [
            '-c',
            'read -r _; kill -9 "$1" 2>/dev/null; rm -rf "$2"',
            'redis-watchdog',
            String(child.pid),
            dir,
          ],
          {
            stdio: ['pipe', 'ignore', 'ignore'],
          },
        );
  watchdog?.on('error', () => undefined);
  watchdog?.stdin?.on('error', () => undefined);

  const onExit = (): void => {
    if (running.exited) return;
    running.exited = true;
    livePids.delete(running.pid);
    watchdog?.kill('SIGKILL');
    markExited();
  };
  child.on('exit', onExit);
  child.on('error', (error) => {
    collect(Buffer.from(`spawn failed: ${error.message}\n`));
    onExit();
  });
  if (child.pid !== undefined) livePids.add(child.pid);

  // Neither a forgotten server nor its watchdog may keep the test process alive; the watchdog cleans up.
  for (const handle of [child, watchdog, child.stdout, child.stderr, watchdog?.stdin]) {
    (handle as Partial<Socket> | null | undefined)?.unref?.();
  }
  return running;
}

async function waitUntilReady(running: RunningRedis, port: number): Promise<void> {
  const giveUpAt = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (running.exited) {
      // Let the pipes deliver redis's last words (the reason it exited).
      await Promise.race([
        new Promise((resolve) => running.child.once('close', resolve)),
        sleep(1_000),
      ]);
      throw new StartFailure(
        `redis-server on port ${port} exited during startup:\n${running.output}`,
        /Address already in use/i.test(running.output),
      );
    }
    if (await answersPing(port)) return;
    if (Date.now() > giveUpAt) {
      running.child.kill('SIGKILL');
      await running.exitedPromise;
      throw new StartFailure(
        `redis-server on port ${port} did not answer PING within ${READY_TIMEOUT_MS} ms:\n${running.output}`,
        false,
      );
    }
    await sleep(POLL_INTERVAL_MS);
  }
}

function exitsWithin(running: RunningRedis, limitMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    running.exitedPromise.then(() => true),
    new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), limitMs))),
  ]).finally(() => clearTimeout(timer));
}

function clusterArgs(dir: string, nodeTimeoutMs = CLUSTER_NODE_TIMEOUT_MS): string[] {
  return [
    ...['--cluster-enabled', 'yes', '--cluster-config-file', join(dir, 'nodes.conf')],
    ...['--cluster-node-timeout', String(nodeTimeoutMs)],
  ];
}

/**
 * Writes a Sentinel's config file (once: a Sentinel rewrites it with what it learns, and keeps it
 * across restarts) and returns its path.
 */
function sentinelConfig(dir: string, options: SentinelOptions): string {
  const file = join(dir, 'sentinel.conf');
  if (existsSync(file)) return file;
  const { masterName, master } = options;
  const lines = [
    `sentinel monitor ${masterName} ${master.host} ${master.port} ${options.quorum}`,
    `sentinel down-after-milliseconds ${masterName} ${options.downAfterMs}`,
    `sentinel failover-timeout ${masterName} ${options.failoverTimeoutMs}`,
    `sentinel parallel-syncs ${masterName} 1`,
  ];
  writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

function splitField(field: string): [string, string] {
  const at = field.indexOf('=');
  return at < 0 ? [field, ''] : [field.slice(0, at), field.slice(at + 1)];
}

function createCluster(
  cli: string,
  nodes: readonly RedisServer[],
  replicas: number,
): Promise<void> {
  const addresses = nodes.map((node) => `${node.host}:${node.port}`);
  const args = ['--cluster', 'create', ...addresses];
  args.push('--cluster-replicas', String(replicas), '--cluster-yes');
  return new Promise((resolve, reject) => {
    execFile(cli, args, { timeout: CLUSTER_READY_TIMEOUT_MS }, (error, stdout, stderr) => {
      if (error)
        reject(
          new Error(`redis-cli ${args.join(' ')} failed:\n${stdout}${stderr}`, { cause: error }),
        );
      else resolve();
    });
  });
}

/** Waits for `cluster_state:ok` on every node, and (when given) for each to know `known` nodes. */
async function waitForClusterOk(nodes: readonly RedisServer[], known?: number): Promise<void> {
  const giveUpAt = Date.now() + CLUSTER_READY_TIMEOUT_MS;
  for (;;) {
    const infos = await Promise.all(
      nodes.map((node) => sendCommand(node.port, ['CLUSTER', 'INFO']).catch(String)),
    );
    const ready = infos.every(
      (info) =>
        /^cluster_state:ok\r?$/m.test(String(info)) &&
        (known === undefined ||
          new RegExp(`^cluster_known_nodes:${known}\\r?$`, 'm').test(String(info))),
    );
    if (ready) return;
    if (Date.now() > giveUpAt) {
      const last = infos.map(String).join('\n---\n');
      throw new Error(
        `cluster did not reach cluster_state:ok within ${CLUSTER_READY_TIMEOUT_MS} ms:\n${last}`,
      );
    }
    await sleep(POLL_INTERVAL_MS * 5);
  }
}

function track<T extends Redis | Cluster>(client: T): T {
  clients.add(client);
  client.once('end', () => clients.delete(client));
  return client;
}

// ---------------------------------------------------------------------------------------------
// Ports and binaries

function findExecutable(name: string, searchPath: string): string {
  for (const dir of searchPath.split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, fsConstants.X_OK);
      if (statSync(candidate).isFile()) return candidate;
    } catch {
      // not here
    }
  }
  throw new Error(`${name} was not found on PATH. ${INSTALL_HINT}`);
}

/** A loopback port that was free a moment ago (and, for a cluster node, whose bus port is free too). */
async function pickFreePort(needsBusPort: boolean): Promise<number> {
  for (let attempt = 0; attempt < PORT_PICK_ATTEMPTS; attempt++) {
    const port = await bindAndRelease(0);
    if (port === undefined || port === MACHINE_REDIS_PORT) continue;
    if (!needsBusPort) return port;
    const busPort = port + CLUSTER_BUS_PORT_OFFSET;
    if (busPort > MAX_PORT || busPort === MACHINE_REDIS_PORT + CLUSTER_BUS_PORT_OFFSET) continue;
    if ((await bindAndRelease(busPort)) !== undefined) return port;
  }
  throw new Error(`no free loopback port found in ${PORT_PICK_ATTEMPTS} attempts`);
}

/** Binds `port` (0: any) on loopback and closes it; the bound port, or undefined if it was in use. */
function bindAndRelease(port: number): Promise<number | undefined> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.unref();
    probe.once('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'EADDRINUSE' || error.code === 'EACCES') resolve(undefined);
      else reject(error);
    });
    probe.listen({ host: LOOPBACK, port, exclusive: true }, () => {
      const address = probe.address();
      const bound = typeof address === 'object' && address !== null ? address.port : undefined;
      probe.close(() => resolve(bound));
    });
  });
}

// ---------------------------------------------------------------------------------------------
// A minimal RESP client for the helper's own commands, so they add nothing (no HELLO, no
// CLIENT SETINFO, no ready-check INFO) to the command stats the tests read.

export type Reply = string | number | null | Reply[];

async function answersPing(port: number): Promise<boolean> {
  try {
    return (await sendCommand(port, ['PING'], 500)) === 'PONG';
  } catch {
    return false;
  }
}

function sendCommand(
  port: number,
  args: readonly string[],
  timeoutMs = ADMIN_COMMAND_TIMEOUT_MS,
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const socket = createConnection({ host: LOOPBACK, port });
    let received = Buffer.alloc(0);
    let settled = false;
    const finish = (error: Error | undefined, value: Reply = null): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      if (error) reject(error);
      else resolve(value);
    };
    const timer = setTimeout(
      () =>
        finish(
          new Error(`${args.join(' ')} to ${LOOPBACK}:${port} got no reply within ${timeoutMs} ms`),
        ),
      timeoutMs,
    );
    socket.once('connect', () => socket.write(encodeCommand(args)));
    socket.on('data', (chunk) => {
      received = Buffer.concat([received, chunk]);
      const reply = parseReply(received);
      if (reply) finish(reply.error, reply.value);
    });
    socket.once('error', (error) => finish(error));
    socket.once('close', () =>
      finish(new Error(`${LOOPBACK}:${port} closed the connection before replying`)),
    );
  });
}

function encodeCommand(args: readonly string[]): string {
  return `*${args.length}\r\n${args.map((arg) => `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`).join('')}`;
}

/** Parses one reply (arrays included); undefined while incomplete. */
function parseReply(buffer: Buffer): { value?: Reply; error?: Error } | undefined {
  const parsed = parseAt(buffer, 0);
  if (parsed === undefined) return undefined;
  return parsed.error === undefined ? { value: parsed.value } : { error: parsed.error };
}

interface Parsed {
  readonly value: Reply;
  readonly error?: Error;
  /** Where the next reply starts. */
  readonly end: number;
}

function parseAt(buffer: Buffer, start: number): Parsed | undefined {
  const headerEnd = buffer.indexOf('\r\n', start);
  if (headerEnd < 0) return undefined;
  const header = buffer.toString('utf8', start + 1, headerEnd);
  const next = headerEnd + 2;
  switch (String.fromCharCode(buffer[start]!)) {
    case '+':
      return { value: header, end: next };
    case '-':
      return { value: null, error: new Error(header), end: next };
    case ':':
      return { value: Number(header), end: next };
    case '$': {
      const length = Number(header);
      if (length < 0) return { value: null, end: next };
      if (buffer.length < next + length + 2) return undefined;
      return { value: buffer.toString('utf8', next, next + length), end: next + length + 2 };
    }
    case '*': {
      const count = Number(header);
      if (count < 0) return { value: null, end: next };
      const items: Reply[] = [];
      let at = next;
      for (let i = 0; i < count; i++) {
        const item = parseAt(buffer, at);
        if (item === undefined) return undefined;
        items.push(item.value);
        at = item.end;
      }
      return { value: items, end: at };
    }
    default:
      return {
        value: null,
        error: new Error(`unsupported RESP reply: ${buffer.toString('utf8', start, headerEnd)}`),
        end: next,
      };
  }
}

/**
 * A master, or a replica whose link to its master is up and synced, and which its master counts as
 * online (it does so only from the replica's first ACK, up to a second after the sync: before that,
 * WAIT does not count it).
 */
async function isSyncedOrMaster(server: RedisServer): Promise<boolean> {
  const info = await server.info('replication').catch(() => ({}) as Record<string, string>);
  if (info['role'] === 'master') return true;
  if (info['master_link_status'] !== 'up' || info['master_sync_in_progress'] !== '0') return false;
  const master = [...servers].find(
    (candidate) => candidate.running && candidate.port === Number(info['master_port']),
  );
  if (master === undefined) return true;
  const seen = await master.info('replication');
  return Object.entries(seen).some(
    ([field, value]) =>
      /^slave\d+$/.test(field) && value.includes(`port=${server.port},state=online`),
  );
}

/** Polls `condition` until it holds; fails after `limitMs` naming `what`. */
async function pollUntil(
  condition: () => Promise<boolean>,
  what: string,
  limitMs = CLUSTER_READY_TIMEOUT_MS,
): Promise<void> {
  const giveUpAt = Date.now() + limitMs;
  while (!(await condition().catch(() => false))) {
    if (Date.now() > giveUpAt) throw new Error(`timed out after ${limitMs} ms waiting for ${what}`);
    await sleep(POLL_INTERVAL_MS * 2);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
