import { type Duration, parseDuration } from '../lib/index.js';

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
  /**
   * Serves `POST /ops/database/down` and `/up`, which make every database query fail (to watch the
   * dashboard and the alerts during an outage). Off unless `OUTAGE_SWITCH=1`.
   */
  readonly outageSwitch?: boolean;
}

export function configFromEnv(env: NodeJS.ProcessEnv = process.env): SampleConfig {
  return {
    host: env['HOST'] ?? '127.0.0.1',
    port: integer(env['PORT'] ?? '3000', 'PORT'),
    redisUrl: env['REDIS_URL'] === '' ? undefined : env['REDIS_URL'],
    databaseFile: env['CATALOG_DB'] ?? 'sample/data/catalog.db',
    queryDelayMs: integer(env['QUERY_DELAY_MS'] ?? '100', 'QUERY_DELAY_MS'),
    soft: duration(env['CACHE_SOFT'] ?? '10s', 'CACHE_SOFT'),
    hard: duration(env['CACHE_HARD'] ?? '2m', 'CACHE_HARD'),
    outageSwitch: flag(env['OUTAGE_SWITCH'] ?? '0', 'OUTAGE_SWITCH'),
  };
}

function flag(raw: string, name: string): boolean {
  if (raw === '1') return true;
  if (raw === '0' || raw === '') return false;
  throw new Error(`${name} must be 1 or 0, received "${raw}"`);
}

function integer(raw: string, name: string): number {
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0)
    throw new Error(`${name} must be a non-negative integer, received "${raw}"`);
  return value;
}

/**
 * A duration from the environment needs its unit (`2s`, `500ms`, `5m`): a bare `2` could mean
 * seconds or milliseconds, and guessing wrong silently makes the cache 1,000 times off.
 */
function duration(raw: string, name: string): Duration {
  if (/^\s*\d+(\.\d+)?\s*$/.test(raw)) {
    const n = raw.trim();
    throw new Error(
      `${name}=${n} needs a unit: ${n}s, ${n}ms, ${n}m, ${n}h or ${n}d (a bare number could mean seconds or milliseconds)`,
    );
  }
  parseDuration(raw, name); // throws a ConfigurationError naming the variable
  return raw as Duration;
}
