/**
 * The dashboard and the alert rules of observability/ on a real Prometheus (npm run
 * test:prometheus; not part of npm test, it needs the `prometheus` and `promtool` binaries). The
 * sample app runs on Redis behind a fault proxy; Prometheus scrapes it every second and evaluates
 * the real rule expressions every second, with their `for:` set to 0s so that a run takes about a
 * minute. The test drives a herd, a failing database, a stuck lease holder, cut notifications and a
 * Redis outage through the sample, and checks through Prometheus's HTTP API that each alert fires
 * when its condition is made true and not before, and that every dashboard query returns data.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { type Lease } from '../../lib/index.js';
import { RedisStore } from '../../lib/redis.js';
import { AppModule } from '../../sample/app.module.js';
import { sleep } from '../helpers/deferred.js';
import { FaultProxy, stopAllFaultProxies } from '../helpers/fault-proxy.js';
import {
  OBSERVABILITY_DIR,
  dashboardQueries,
  readAlertRules,
} from '../helpers/observability-files.js';
import { type PromAlert, PrometheusServer } from '../helpers/prometheus-server.js';
import { findPrometheusBinary, promtool } from '../helpers/prometheus-tools.js';
import { RedisServer, stopAllRedisServers } from '../helpers/redis-server.js';

const JOB = 'herd-guard-sample';
const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** Grafana's `$__rate_interval` for a 1 s scrape interval: four scrapes. */
const RATE_INTERVAL = '4s';
const ALERT_WAIT_MS = 30_000;
/** Warm products the background traffic reads, and the phases expire. */
const WARM = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];

let redis: RedisServer;
let proxy: FaultProxy;
let app: INestApplication | undefined;
let base: string;
let prometheus: PrometheusServer | undefined;
let traffic: { stop(): Promise<void> } | undefined;
let startedAtS: number;

/** The rules as shipped, every `for:` set to 0s: the expressions under test are the real ones. */
function rulesWithoutFor(): string {
  const rules = readFileSync(new URL('alerts.yml', OBSERVABILITY_DIR), 'utf8');
  return rules.replace(/^(\s*for:\s*)\S+\s*$/gm, '$10s');
}

/** GET or POST on the sample; the status, never a throw (the sample may be failing on purpose). */
async function call(path: string, method: 'GET' | 'POST' = 'GET', body?: unknown): Promise<number> {
  try {
    const response = await fetch(`${base}${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    await response.arrayBuffer();
    return response.status;
  } catch {
    return 0;
  }
}

async function databaseQueries(): Promise<number> {
  const stats = (await (await fetch(`${base}/stats`)).json()) as { databaseQueries: number };
  return stats.databaseQueries;
}

/** Reads the warm products over and over, one round at a time, until stopped. */
function keepReading(): { stop(): Promise<void> } {
  let running = true;
  const loop = (async () => {
    while (running) {
      await Promise.all(WARM.map((id) => call(`/products/${id}`)));
      await sleep(100);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
    },
  };
}

/** Repeats `action` until `condition` holds, or fails after `limitMs` saying what it waited for. */
async function driveUntil(
  what: string,
  condition: () => Promise<boolean>,
  action: () => Promise<unknown> = async () => undefined,
  limitMs = ALERT_WAIT_MS,
): Promise<void> {
  const giveUpAt = Date.now() + limitMs;
  for (;;) {
    await action();
    if (await condition()) return;
    if (Date.now() > giveUpAt) {
      const active = await activeAlerts();
      throw new Error(`Timed out waiting for ${what}; active alerts: ${JSON.stringify(active)}`);
    }
    await sleep(250);
  }
}

async function activeAlerts(): Promise<Record<string, PromAlert['state']>> {
  const active: Record<string, PromAlert['state']> = {};
  for (const alert of await prometheus!.alerts()) active[alert.labels['alertname']!] = alert.state;
  return active;
}

const firing = (name: string) => async (): Promise<boolean> =>
  (await activeAlerts())[name] === 'firing';
const inactive = (name: string) => async (): Promise<boolean> =>
  (await activeAlerts())[name] === undefined;

/** Lets Prometheus scrape and evaluate a few times, so that a condition had its chance to show. */
const settle = (): Promise<void> => sleep(3_000);

beforeAll(async () => {
  // Missing binaries fail every test here with the install hint, before anything starts.
  findPrometheusBinary('prometheus');
  findPrometheusBinary('promtool');
  redis = await RedisServer.start();
  proxy = await FaultProxy.start(redis);
  app = await NestFactory.create(
    AppModule.register({
      host: '127.0.0.1',
      port: 0,
      redisUrl: proxy.url,
      databaseFile: ':memory:',
      queryDelayMs: 30,
      soft: '1m',
      hard: '10m',
      outageSwitch: true,
    }),
    { logger: false, abortOnError: false },
  );
  await app.listen(0, '127.0.0.1');
  const { port } = (app.getHttpServer() as { address(): AddressInfo }).address();
  base = `http://127.0.0.1:${port}`;
  startedAtS = Math.floor(Date.now() / 1_000);
  prometheus = await PrometheusServer.start({
    targets: [`127.0.0.1:${port}`],
    job: JOB,
    rules: { 'alerts.yml': rulesWithoutFor() },
  });
  for (const id of WARM) expect(await call(`/products/${id}`)).toBe(200);
  traffic = keepReading();
  await driveUntil(
    'the first scrape of the sample',
    async () => (await prometheus!.query(`up{job="${JOB}"} == 1`)).length === 1,
  );
}, 60_000);

afterAll(async () => {
  await traffic?.stop();
  await prometheus?.stop();
  await app?.close();
  await stopAllFaultProxies();
  await stopAllRedisServers();
});

describe('observability/ on a real Prometheus', () => {
  it('passes promtool: alerts.yml and the example prometheus.yml check, alerts.test.yml passes', () => {
    for (const args of [
      ['check', 'rules', 'observability/alerts.yml'],
      ['check', 'config', 'observability/prometheus.yml'],
      ['test', 'rules', 'observability/alerts.test.yml'],
    ]) {
      const run = promtool(args, REPO_ROOT);
      expect({ args, status: run.status, output: run.output }).toMatchObject({ status: 0 });
    }
  });

  it('loads the real rule expressions, and no alert is active while the sample serves a herd', async () => {
    const rules = await prometheus!.rules();
    expect(rules.map((rule) => rule.name)).toEqual(readAlertRules().map((rule) => rule.alert));
    expect(rules.every((rule) => rule.duration === 0)).toBe(true);
    const queriesBefore = await databaseQueries();
    const herd = await Promise.all(Array.from({ length: 300 }, () => call('/products/77')));
    expect(herd.every((status) => status === 200)).toBe(true);
    expect((await databaseQueries()) - queriesBefore).toBe(1);
    await call('/products/999999');
    await settle();
    expect(await activeAlerts()).toEqual({});
    expect((await prometheus!.rules()).every((rule) => rule.health === 'ok')).toBe(true);
    const [reads] = await prometheus!.query(`sum(herd_guard_requests_total{job="${JOB}"})`);
    expect(Number(reads!.values[0]![1])).toBeGreaterThanOrEqual(300);
  });

  it('fires HerdGuardLoaderErrors while loads of cold keys fail, but not the stale alert: nothing stale hides them', async () => {
    expect(await call('/ops/database/down', 'POST')).toBe(200);
    let id = 100;
    await driveUntil('HerdGuardLoaderErrors to fire', firing('HerdGuardLoaderErrors'), async () => {
      expect(await call(`/products/${(id += 1)}`)).toBe(500);
    });
    expect(await inactive('HerdGuardServingStaleWhileLoadsFail')()).toBe(true);
  });

  it('fires HerdGuardServingStaleWhileLoadsFail once stale values answer for the failing loads', async () => {
    let round = 0;
    await driveUntil(
      'HerdGuardServingStaleWhileLoadsFail to fire',
      firing('HerdGuardServingStaleWhileLoadsFail'),
      async () => {
        // A price change marks the product stale; its refresh then fails and the old value is served.
        const id = WARM[(round += 1) % WARM.length]!;
        expect(await call(`/products/${id}/price`, 'POST', { priceCents: 100 + round })).toBe(200);
        expect(await call(`/products/${id}`)).toBe(200);
      },
    );
    expect(await call('/ops/database/up', 'POST')).toBe(200);
  });

  it("fires HerdGuardLeaseTakeovers when a stuck holder's lease is taken over after waitTimeout", async () => {
    expect(await inactive('HerdGuardLeaseTakeovers')()).toBe(true);
    // Another pod that took the lease of the category summary and keeps it without loading.
    const stuck = new RedisStore({ url: redis.url, namespace: 'catalog' });
    expect(await stuck.ready(10_000)).toBe(true);
    const { lease } = await stuck.acquireLease('category-summary', 3_000);
    expect(lease).toBeDefined();
    const keepAlive = setInterval(
      () => void stuck.extendLease(lease as Lease, 3_000).catch(() => false),
      500,
    );
    try {
      await settle();
      expect(await inactive('HerdGuardLeaseTakeovers')()).toBe(true);
      // The sample waits waitTimeout (5 s) for the holder, then takes the lease over and loads.
      expect(await call('/categories')).toBe(200);
      await driveUntil('HerdGuardLeaseTakeovers to fire', firing('HerdGuardLeaseTakeovers'));
    } finally {
      clearInterval(keepAlive);
      await stuck.close();
    }
  });

  it('fires HerdGuardNearCacheUntrusted while notifications are cut and Redis answers, and clears when they return', async () => {
    expect(await inactive('HerdGuardNearCacheUntrusted')()).toBe(true);
    proxy.refuseNew();
    expect(proxy.dropWhere((connection) => connection.isSubscriber)).toBe(1);
    await driveUntil('HerdGuardNearCacheUntrusted to fire', firing('HerdGuardNearCacheUntrusted'));
    expect(await inactive('HerdGuardStoreBreakerOpen')()).toBe(true);
    proxy.restore();
    await driveUntil(
      'HerdGuardNearCacheUntrusted to clear',
      inactive('HerdGuardNearCacheUntrusted'),
    );
  });

  it('fires HerdGuardStoreBreakerOpen while Redis does not answer, not the near-cache alert, and clears after', async () => {
    expect(await inactive('HerdGuardStoreBreakerOpen')()).toBe(true);
    proxy.blackhole({ refuseNew: true });
    // Reads of cold keys go to Redis at once: their timeouts open the breaker.
    const cold = Promise.all(Array.from({ length: 10 }, (_, i) => call(`/products/${200 + i}`)));
    await driveUntil('HerdGuardStoreBreakerOpen to fire', firing('HerdGuardStoreBreakerOpen'));
    await settle();
    expect(await activeAlerts()).toMatchObject({ HerdGuardStoreBreakerOpen: 'firing' });
    expect(await inactive('HerdGuardNearCacheUntrusted')()).toBe(true);
    proxy.restore();
    await cold;
    await driveUntil('HerdGuardStoreBreakerOpen to clear', inactive('HerdGuardStoreBreakerOpen'));
  });

  it('answers every query of the dashboard with data over the run', async () => {
    const endS = Math.ceil(Date.now() / 1_000);
    const rangeS = endS - startedAtS;
    const empty: string[] = [];
    for (const { source, expr } of dashboardQueries()) {
      const promql = expr
        .replaceAll('$cache', '.*')
        .replaceAll('$__rate_interval', RATE_INTERVAL)
        .replaceAll('$__range_s', String(rangeS))
        .replaceAll('$__range', `${rangeS}s`);
      const series = await prometheus!.queryRange(promql, startedAtS, endS, 1);
      const hasData = series.some((one) =>
        one.values.some(([, value]) => Number.isFinite(Number(value))),
      );
      if (!hasData) empty.push(`${source}: ${promql}`);
    }
    expect(empty).toEqual([]);
    // What the run drove is on the dashboard.
    const max = async (promql: string): Promise<number> => {
      const series = await prometheus!.queryRange(promql, startedAtS, endS, 1);
      return Math.max(...series.flatMap((one) => one.values.map(([, value]) => Number(value))));
    };
    expect(await max('max(herd_guard_breaker_state)')).toBe(2);
    expect(await max('min(herd_guard_near_cache_trusted)')).toBe(1);
    expect(await max('sum(herd_guard_lease_takeovers_total)')).toBe(1);
    expect(
      await max('sum(herd_guard_stale_served_on_error_total{reason="loader-failed"})'),
    ).toBeGreaterThan(0);
    expect(
      await max(`sum(rate(herd_guard_near_cache_hits_total[${RATE_INTERVAL}]))`),
    ).toBeGreaterThan(0);
  });
});
