/**
 * A throwaway Prometheus server for tests: its own config, rules and data in a temp directory, on
 * a free loopback port, scraping the given targets. Never the machine's own Prometheus (a
 * distribution's package may run one on :9090). `stop()` ends it and removes its directory.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findPrometheusBinary } from './prometheus-tools.js';

const LOOPBACK = '127.0.0.1';
const READY_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 10_000;
/** Only the tail of Prometheus's log is kept, for error messages. */
const OUTPUT_LIMIT_CHARS = 16_000;

export interface PrometheusServerOptions {
  /** `host:port` of each target, scraped at `/metrics` under the job name `job`. */
  readonly targets: readonly string[];
  readonly job: string;
  /** Rule files' contents, by file name. */
  readonly rules?: Readonly<Record<string, string>>;
  /** Scrape and rule evaluation interval, in seconds. */
  readonly intervalSeconds?: number;
}

/** One series of a query's answer: its labels and its values, as Prometheus sends them. */
export interface PromSeries {
  readonly metric: Readonly<Record<string, string>>;
  readonly values: ReadonlyArray<readonly [number, string]>;
}

export interface PromAlert {
  readonly labels: Readonly<Record<string, string>>;
  readonly state: 'pending' | 'firing';
}

export interface PromRule {
  readonly name: string;
  readonly query: string;
  readonly duration: number;
  readonly health: string;
  readonly lastError?: string;
}

export class PrometheusServer {
  #output = '';

  private constructor(
    private readonly child: ChildProcess,
    private readonly dir: string,
    readonly port: number,
  ) {
    const keep = (chunk: Buffer): void => {
      this.#output = (this.#output + chunk.toString('utf8')).slice(-OUTPUT_LIMIT_CHARS);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
  }

  static async start(options: PrometheusServerOptions): Promise<PrometheusServer> {
    const binary = findPrometheusBinary('prometheus');
    const dir = mkdtempSync(join(tmpdir(), 'herd-guard-prometheus-'));
    const interval = `${options.intervalSeconds ?? 1}s`;
    const ruleFiles = Object.entries(options.rules ?? {}).map(([name, content]) => {
      writeFileSync(join(dir, name), content);
      return name;
    });
    // Rule files are read relative to the config file's directory.
    writeFileSync(
      join(dir, 'prometheus.yml'),
      [
        'global:',
        `  scrape_interval: ${interval}`,
        `  scrape_timeout: ${interval}`,
        `  evaluation_interval: ${interval}`,
        'rule_files:',
        ...ruleFiles.map((name) => `  - ${name}`),
        'scrape_configs:',
        `  - job_name: ${options.job}`,
        '    static_configs:',
        `      - targets: [${options.targets.map((target) => `'${target}'`).join(', ')}]`,
        '',
      ].join('\n'),
    );
    const port = await freePort();
    const child = spawn(
      binary,
      [
        `--config.file=${join(dir, 'prometheus.yml')}`,
        `--storage.tsdb.path=${join(dir, 'data')}`,
        `--web.listen-address=${LOOPBACK}:${port}`,
        '--log.level=warn',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    // If the test process dies without stop(), the watchdog's stdin reaches EOF and it cleans up.
    const watchdog = spawn(
      'sh',
      [
        '-c',
        'read -r _; kill -9 "$1" 2>/dev/null; rm -rf "$2"',
        'prometheus-watchdog',
        String(child.pid),
        dir,
      ],
      { stdio: ['pipe', 'ignore', 'ignore'] },
    );
    watchdog.on('error', () => undefined);
    watchdog.stdin?.on('error', () => undefined);
    child.once('exit', () => watchdog.kill('SIGKILL'));
    const server = new PrometheusServer(child, dir, port);
    try {
      await server.#ready();
    } catch (error) {
      await server.stop();
      throw error;
    }
    return server;
  }

  get url(): string {
    return `http://${LOOPBACK}:${this.port}`;
  }

  /** The tail of Prometheus's own log. */
  get output(): string {
    return this.#output;
  }

  /** An instant query at now. */
  async query(expr: string): Promise<PromSeries[]> {
    const data = await this.#api<{
      result: Array<{ metric: PromSeries['metric']; value: [number, string] }>;
    }>('query', { query: expr });
    return data.result.map(({ metric, value }) => ({ metric, values: [value] }));
  }

  /** A range query from `startS` to `endS` (Unix seconds), one point per `stepS`. */
  async queryRange(
    expr: string,
    startS: number,
    endS: number,
    stepS: number,
  ): Promise<PromSeries[]> {
    const data = await this.#api<{ result: PromSeries[] }>('query_range', {
      query: expr,
      start: String(startS),
      end: String(endS),
      step: String(stepS),
    });
    return data.result;
  }

  /** Alerts pending or firing now. */
  async alerts(): Promise<PromAlert[]> {
    return (await this.#api<{ alerts: PromAlert[] }>('alerts', {})).alerts;
  }

  /** The alerting rules loaded. */
  async rules(): Promise<PromRule[]> {
    const data = await this.#api<{ groups: Array<{ rules: PromRule[] }> }>('rules', {
      type: 'alert',
    });
    return data.groups.flatMap((group) => group.rules);
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      const exited = once(this.child, 'exit');
      this.child.kill('SIGTERM');
      const timer = setTimeout(() => this.child.kill('SIGKILL'), STOP_TIMEOUT_MS);
      await exited;
      clearTimeout(timer);
    }
    rmSync(this.dir, { recursive: true, force: true });
  }

  async #api<T>(path: string, params: Record<string, string>): Promise<T> {
    const response = await fetch(`${this.url}/api/v1/${path}?${new URLSearchParams(params)}`);
    const body = (await response.json()) as { status: string; data: T; error?: string };
    if (body.status !== 'success')
      throw new Error(
        `Prometheus ${path} ${JSON.stringify(params)}: ${body.error ?? response.status}`,
      );
    return body.data;
  }

  async #ready(): Promise<void> {
    const deadline = performance.now() + READY_TIMEOUT_MS;
    while (performance.now() < deadline) {
      if (this.child.exitCode !== null)
        throw new Error(`prometheus exited with ${this.child.exitCode}:\n${this.#output}`);
      try {
        if ((await fetch(`${this.url}/-/ready`)).ok) return;
      } catch {
        // not listening yet
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error(`prometheus was not ready within ${READY_TIMEOUT_MS} ms:\n${this.#output}`);
  }
}

async function freePort(): Promise<number> {
  const probe = createServer();
  probe.listen(0, LOOPBACK);
  await once(probe, 'listening');
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}
