import { afterEach, describe, expect, it } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import request from 'supertest';
import { AppModule } from '../../sample/app.module.js';
import type { SampleConfig } from '../../sample/config.js';
import { metricNames, unexported } from '../helpers/metric-references.js';
import { dashboardQueries, readAlertRules, readDashboard } from '../helpers/observability-files.js';
import { RedisServer, stopAllRedisServers } from '../helpers/redis-server.js';

/** The variables the dashboard defines or Grafana provides; the Prometheus test substitutes them. */
const DASHBOARD_VARIABLES = new Set(['cache', '__rate_interval', '__range', '__range_s']);
const ALERTS = [
  'HerdGuardServingStaleWhileLoadsFail',
  'HerdGuardStoreBreakerOpen',
  'HerdGuardLoaderErrors',
  'HerdGuardLeaseTakeovers',
  'HerdGuardNearCacheUntrusted',
];

let app: INestApplication | undefined;

async function startSample(overrides: Partial<SampleConfig>): Promise<INestApplication> {
  app = await NestFactory.create(
    AppModule.register({
      host: '127.0.0.1',
      port: 0,
      redisUrl: undefined,
      databaseFile: ':memory:',
      queryDelayMs: 20,
      soft: '1m',
      hard: '2m',
      ...overrides,
    }),
    { logger: false, abortOnError: false },
  );
  await app.listen(0, '127.0.0.1');
  return app;
}

afterEach(async () => {
  await app?.close();
  app = undefined;
  await stopAllRedisServers();
});

describe('the metric names in observability/', () => {
  it('are read from PromQL without functions, keywords, label names, durations or Grafana variables', () => {
    expect(
      metricNames(
        'sum by (le, path) (rate(a_bucket{cache=~"$cache",result="b c"}[$__rate_interval])) / on (cache) group_left (instance) b_total offset 5m > 0.05 * $__range_s',
      ),
    ).toEqual(['a_bucket', 'b_total']);
    expect(
      metricNames(
        'histogram_quantile(0.99, sum(rate(c_bucket[1m]))) and max_over_time(d[1h:1m]) > bool 1e3 unless e == 0',
      ),
    ).toEqual(['c_bucket', 'd', 'e']);
  });

  it('are refused when a scrape does not export them, or names a histogram without its series suffix', () => {
    const exposition = [
      '# HELP x_total x',
      '# TYPE x_total counter',
      'x_total{cache="c"} 1',
      '# HELP y_seconds y',
      '# TYPE y_seconds histogram',
      '# HELP z z',
      '# TYPE z gauge',
    ].join('\n');
    expect(unexported(['x_total', 'y_seconds_bucket', 'y_seconds_count', 'z'], exposition)).toEqual(
      [],
    );
    expect(unexported(['x_totals', 'y_seconds', 'x_total_bucket'], exposition)).toEqual([
      'x_totals is not exported',
      'y_seconds is a histogram: query its _bucket/_sum/_count series',
      'x_total_bucket is not exported',
    ]);
  });

  it('cover the five alerts, each with an expression and a `for`', () => {
    const rules = readAlertRules();
    expect(rules.map((rule) => rule.alert)).toEqual(ALERTS);
    for (const rule of rules) {
      expect(metricNames(rule.expr).length).toBeGreaterThan(0);
      expect(rule.for).toMatch(/^\d+[smh]$/);
    }
  });

  it('are all exported by the sample on Redis, after a herd, a negative read and a failing load', async () => {
    const redis = await RedisServer.start();
    const server = await startSample({ redisUrl: redis.url, outageSwitch: true });
    const http = server.getHttpServer();
    const herd = await Promise.all(
      Array.from({ length: 50 }, () => request(http).get('/products/5')),
    );
    expect(herd.every((response) => response.status === 200)).toBe(true);
    await request(http).get('/products/5').expect(200).expect('X-Cache', 'HIT');
    await request(http).get('/products/999999').expect(404);
    await request(http).get('/categories').expect(200);
    await request(http).post('/ops/database/down').expect(200);
    await request(http).get('/products/6').expect(500);
    await request(http).post('/ops/database/up').expect(200);

    const exposition = (await request(http).get('/metrics').expect(200)).text;
    const queries = [
      ...dashboardQueries().map(({ source, expr }) => ({ source: `dashboard: ${source}`, expr })),
      ...readAlertRules().map(({ alert, expr }) => ({ source: `alert ${alert}`, expr })),
    ];
    const problems = queries.flatMap(({ source, expr }) =>
      unexported(metricNames(expr), exposition).map((problem) => `${source}: ${problem}`),
    );
    expect(problems).toEqual([]);
    // Every panel of the dashboard was read, and each names a metric.
    expect(queries.length).toBeGreaterThan(20);
    for (const { source, expr } of queries)
      expect([source, metricNames(expr).length > 0]).toEqual([source, true]);
  });

  it('are queried by the dashboard through its own data source and variables only', () => {
    const dashboard = readDashboard();
    for (const { source, expr } of dashboardQueries(dashboard)) {
      for (const variable of expr.matchAll(/\$\{?(\w+)/g))
        expect([source, DASHBOARD_VARIABLES.has(variable[1]!)]).toEqual([source, true]);
    }
    const text = JSON.stringify(dashboard);
    const datasources = [...text.matchAll(/"datasource":\{"type":"(\w+)","uid":"([^"]+)"\}/g)];
    expect(datasources.length).toBeGreaterThan(20);
    expect(new Set(datasources.map((match) => `${match[1]} ${match[2]}`))).toEqual(
      new Set(['prometheus ${datasource}']),
    );
    const ids = (dashboard.panels as ReadonlyArray<{ id?: number }>).map((panel) => panel.id);
    expect(new Set(ids).size).toBe(ids.length);
  });
});

describe('the sample outage switch', () => {
  it('is not served unless OUTAGE_SWITCH=1', async () => {
    const server = await startSample({});
    await request(server.getHttpServer()).post('/ops/database/down').expect(404);
  });
});
