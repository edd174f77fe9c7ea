import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from '@jest/globals';
import { parsePrometheusText } from '../helpers/prometheus-text.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

async function waitForHttp(
  url: string,
  child: ChildProcess,
  output: () => string,
  limitMs = 90_000,
): Promise<void> {
  const giveUpAt = Date.now() + limitMs;
  for (;;) {
    if (child.exitCode !== null)
      throw new Error(`npm start exited with ${child.exitCode}:\n${output()}`);
    try {
      await fetch(url);
      return;
    } catch {
      if (Date.now() > giveUpAt)
        throw new Error(`nothing answered at ${url} within ${limitMs} ms:\n${output()}`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}

const dataDir = mkdtempSync(join(tmpdir(), 'herd-guard-sample-'));
let child: ChildProcess | undefined;

afterAll(async () => {
  if (child !== undefined && child.exitCode === null) {
    process.kill(-child.pid!, 'SIGKILL');
  }
  rmSync(dataDir, { recursive: true, force: true });
});

describe('npm start, as a newcomer runs it', () => {
  it('serves the documented endpoints on the memory store and stops cleanly', async () => {
    const port = await freePort();
    let output = '';
    child = spawn('npm', ['start'], {
      cwd: ROOT,
      detached: true, // its own process group: npm and the node it starts stop together
      env: {
        ...process.env,
        PORT: String(port),
        CATALOG_DB: join(dataDir, 'catalog.db'),
        REDIS_URL: '',
        QUERY_DELAY_MS: '20',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const base = `http://127.0.0.1:${port}`;
    await waitForHttp(`${base}/health`, child, () => output);

    expect(output).toContain('memory store');
    const first = await fetch(`${base}/products/42`);
    expect(first.status).toBe(200);
    expect(first.headers.get('x-cache')).toBe('MISS');
    expect(await first.json()).toMatchObject({ id: 42 });
    const second = await fetch(`${base}/products/42`);
    expect(second.headers.get('x-cache')).toBe('HIT');
    expect(second.headers.get('cache-control')).toMatch(
      /^max-age=\d+, stale-while-revalidate=\d+$/,
    );
    expect((await fetch(`${base}/products/999999`)).status).toBe(404);
    const categories = (await (await fetch(`${base}/categories`)).json()) as unknown[];
    expect(categories).toHaveLength(8);
    expect(await (await fetch(`${base}/health`)).json()).toMatchObject({ status: 'ok' });
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(
      parsePrometheusText(metrics).some((sample) => sample.name === 'herd_guard_requests_total'),
    ).toBe(true);
    expect(await (await fetch(`${base}/stats`)).json()).toMatchObject({ databaseQueries: 3 });
    expect(await (await fetch(`${base}/cache/hot-keys`)).json()).toMatchObject({
      requested: expect.any(Array),
    });

    const exited = new Promise<number | null>((resolve) =>
      child!.once('exit', (code) => resolve(code)),
    );
    process.kill(-child.pid!, 'SIGTERM');
    await exited;
  }, 120_000);
});

describe('npm start --silent with LOG_FORMAT=json', () => {
  it('prints one JSON object per line from the first line on, the start banner included', async () => {
    const port = await freePort();
    let stdout = '';
    let stderr = '';
    child = spawn('npm', ['start', '--silent'], {
      cwd: ROOT,
      detached: true,
      env: {
        ...process.env,
        PORT: String(port),
        CATALOG_DB: join(dataDir, 'catalog-json.db'),
        REDIS_URL: '',
        LOG_FORMAT: 'json',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    await waitForHttp(`http://127.0.0.1:${port}/health`, child, () => stdout + stderr);
    const exited = new Promise<number | null>((resolve) =>
      child!.once('exit', (code) => resolve(code)),
    );
    process.kill(-child.pid!, 'SIGTERM');
    await exited;

    const lines = (stdout + stderr).split('\n').filter((line) => line.trim() !== '');
    expect(lines.length).toBeGreaterThan(3);
    for (const line of lines) {
      expect(() => JSON.parse(line)).not.toThrow();
      expect(JSON.parse(line)).toMatchObject({
        level: expect.any(String),
        message: expect.anything(),
      });
    }
    expect(lines.map((line) => JSON.parse(line) as { message: unknown })).toContainEqual(
      expect.objectContaining({ message: expect.stringContaining('memory store') }),
    );
  }, 120_000);
});
