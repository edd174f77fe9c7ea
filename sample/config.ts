import type { Duration } from '../lib/index.js';

/** Everything the sample reads from the environment, with the defaults a newcomer gets. */
export interface SampleConfig {
  readonly host: string;
  readonly port: number;
  /** Redis URL; without it the sample runs on the embedded memory store. */
  readonly redisUrl: string | undefined;
  /** SQLite file, created and seeded on first start (`:memory:` for a throwaway one). */
  readonly databaseFile: string;
  /** Artificial latency of every database query (a heavy query on a busy database). */
  readonly queryDelayMs: number;
  readonly soft: Duration;
  readonly hard: Duration;
}

export function configFromEnv(env: NodeJS.ProcessEnv = process.env): SampleConfig {
  return {
    host: env['HOST'] ?? '127.0.0.1',
    port: integer(env['PORT'] ?? '3000', 'PORT'),
    redisUrl: env['REDIS_URL'] === '' ? undefined : env['REDIS_URL'],
    databaseFile: env['CATALOG_DB'] ?? 'sample/data/catalog.db',
    queryDelayMs: integer(env['QUERY_DELAY_MS'] ?? '100', 'QUERY_DELAY_MS'),
    soft: (env['CACHE_SOFT'] ?? '10s') as Duration,
    hard: (env['CACHE_HARD'] ?? '2m') as Duration,
  };
}

function integer(raw: string, name: string): number {
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0)
    throw new Error(`${name} must be a non-negative integer, received "${raw}"`);
  return value;
}
