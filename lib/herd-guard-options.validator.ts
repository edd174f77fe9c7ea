import { MAX_HOT_KEYS } from './metrics/hot-keys.js';
import { resolvePolicy } from './core/policy.js';
import { ConfigurationError } from './errors/configuration.error.js';
import { isValidNamespace } from './stores/redis/redis-keys.js';
import type { HerdGuardModuleOptions } from './interfaces/herd-guard-module-options.interface.js';
import type { RedisStoreOptions } from './stores/redis/redis-store.options.js';
import type { HerdGuardTelemetryOptions } from './interfaces/herd-guard-telemetry-options.interface.js';
import type { HerdGuardHotKeysOptions } from './interfaces/herd-guard-hot-keys-options.interface.js';

const MODULE_FIELDS: ReadonlySet<string> = new Set([
  'store',
  'redis',
  'memory',
  'namespace',
  'policy',
  'metrics',
  'logging',
  'hotKeys',
  'telemetry',
  'credentialHeaders',
]);
/** A field name (RFC 9110 §5.1): a token. */
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const TELEMETRY_FIELDS: ReadonlySet<string> = new Set(
  Object.keys({
    tracing: true,
    metrics: true,
    rawKeys: true,
  } satisfies Record<keyof HerdGuardTelemetryOptions, true>),
);
const HOT_KEYS_FIELDS: ReadonlySet<string> = new Set(
  Object.keys({
    capacity: true,
    rawKeys: true,
  } satisfies Record<keyof HerdGuardHotKeysOptions, true>),
);
const MEMORY_FIELDS: ReadonlySet<string> = new Set(['maxEntries', 'now']);
/**
 * Every field of {@link RedisStoreOptions} (`satisfies` fails the build when one is added there and
 * not here).
 */
const REDIS_FIELDS: ReadonlySet<string> = new Set(
  Object.keys({
    url: true,
    redisOptions: true,
    cluster: true,
    client: true,
    namespace: true,
    commandTimeout: true,
    breakerThreshold: true,
    breakerCooldown: true,
    nearCache: true,
    evictionPolicy: true,
    waitForReplicas: true,
  } satisfies Record<keyof RedisStoreOptions, true>),
);
const STORE_METHODS = [
  'get',
  'fill',
  'set',
  'invalidate',
  'addToIndex',
  'indexMembers',
  'acquireLease',
  'extendLease',
  'releaseLease',
  'watchFill',
  'health',
  'close',
] as const;

/**
 * Checks the module options before anything is opened. Throws {@link ConfigurationError} naming
 * the first field that is wrong (so `app.init()` fails at start, not on the first request).
 */
export function validateModuleOptions(input: unknown): HerdGuardModuleOptions {
  if (!isRecord(input)) {
    throw new ConfigurationError('options', `expected an object, received ${describe(input)}`);
  }
  for (const name of Object.keys(input)) {
    if (name === 'isGlobal' || name === 'name') {
      throw new ConfigurationError(
        name,
        `belongs next to useFactory in forRootAsync({ ${name}, useFactory }), not in the options it returns`,
      );
    }
    if (!MODULE_FIELDS.has(name)) {
      throw new ConfigurationError(
        name,
        `unknown option; known options are ${[...MODULE_FIELDS].join(', ')}`,
      );
    }
  }
  const {
    store,
    redis,
    memory,
    namespace,
    policy,
    metrics,
    logging,
    hotKeys,
    telemetry,
    credentialHeaders,
  } = input;
  if (store !== undefined) assertStore(store);
  if (store !== undefined && redis !== undefined) {
    throw new ConfigurationError('redis', 'cannot be used together with "store"; pass one of them');
  }
  if (redis !== undefined) assertRedis(redis);
  if (memory !== undefined) assertMemory(memory, store !== undefined || redis !== undefined);
  if (namespace !== undefined && !isValidNamespace(namespace)) {
    throw new ConfigurationError(
      'namespace',
      `use 1-64 characters from A-Z a-z 0-9 . _ : -, received ${describe(namespace)}`,
    );
  }
  resolvePolicy(policy as HerdGuardModuleOptions['policy'], undefined, 'policy');
  if (metrics !== undefined && typeof metrics !== 'boolean' && !isRecord(metrics)) {
    throw new ConfigurationError(
      'metrics',
      `expected true, false or PrometheusMetricsOptions, received ${describe(metrics)}`,
    );
  }
  if (
    logging !== undefined &&
    typeof logging !== 'boolean' &&
    !(isRecord(logging) && typeof logging['log'] === 'function')
  ) {
    throw new ConfigurationError(
      'logging',
      `expected true, false or a LoggerService, received ${describe(logging)}`,
    );
  }
  if (hotKeys !== undefined) assertHotKeys(hotKeys);
  if (telemetry !== undefined) assertTelemetry(telemetry);
  if (credentialHeaders !== undefined) assertCredentialHeaders(credentialHeaders);
  return input as HerdGuardModuleOptions;
}

/** A header name no request can carry would leave the credential it was meant for unnoticed. */
function assertCredentialHeaders(headers: unknown): void {
  if (!Array.isArray(headers)) {
    throw new ConfigurationError(
      'credentialHeaders',
      `expected a list of request header names such as ['x-api-key'], received ${describe(headers)}`,
    );
  }
  headers.forEach((name: unknown, i) => {
    if (typeof name !== 'string' || !HEADER_NAME.test(name)) {
      throw new ConfigurationError(
        `credentialHeaders[${i}]`,
        `expected a request header name such as 'x-api-key', received ${describe(name)}`,
      );
    }
  });
}

function assertHotKeys(hotKeys: unknown): void {
  if (!isRecord(hotKeys)) return assertHotKeysCapacity(hotKeys, 'hotKeys');
  for (const [name, value] of Object.entries(hotKeys)) {
    if (!HOT_KEYS_FIELDS.has(name)) {
      throw new ConfigurationError(
        `hotKeys.${name}`,
        `unknown option; known options are ${[...HOT_KEYS_FIELDS].join(', ')}`,
      );
    }
    if (value === undefined) continue;
    if (name === 'capacity') assertHotKeysCapacity(value, 'hotKeys.capacity');
    else if (typeof value !== 'boolean') {
      throw new ConfigurationError(
        `hotKeys.${name}`,
        `expected a boolean, received ${describe(value)}`,
      );
    }
  }
}

function assertHotKeysCapacity(capacity: unknown, field: string): void {
  if (typeof capacity === 'number' && Number.isInteger(capacity)) {
    if (capacity >= 0 && capacity <= MAX_HOT_KEYS) return;
  }
  throw new ConfigurationError(
    field,
    `expected an integer from 0 to ${MAX_HOT_KEYS}, received ${describe(capacity)}`,
  );
}

function assertTelemetry(telemetry: unknown): void {
  if (typeof telemetry === 'boolean') return;
  if (!isRecord(telemetry)) {
    throw new ConfigurationError(
      'telemetry',
      `expected true, false or { tracing, metrics, rawKeys }, received ${describe(telemetry)}`,
    );
  }
  for (const [name, value] of Object.entries(telemetry)) {
    if (!TELEMETRY_FIELDS.has(name)) {
      throw new ConfigurationError(
        `telemetry.${name}`,
        `unknown option; known options are ${[...TELEMETRY_FIELDS].join(', ')}`,
      );
    }
    if (value !== undefined && typeof value !== 'boolean') {
      throw new ConfigurationError(
        `telemetry.${name}`,
        `expected true or false, received ${describe(value)}`,
      );
    }
  }
}

function assertStore(store: unknown): void {
  if (!isRecord(store)) {
    throw new ConfigurationError(
      'store',
      `expected a HerdStore instance, received ${describe(store)}`,
    );
  }
  const missing = STORE_METHODS.filter((method) => typeof store[method] !== 'function');
  if (missing.length > 0) {
    throw new ConfigurationError(
      'store',
      `expected a HerdStore instance; it has no ${missing.join(', ')} method`,
    );
  }
}

function assertRedis(redis: unknown): void {
  if (typeof redis === 'string') {
    assertRedisUrl(redis, 'redis');
    return;
  }
  if (!isRecord(redis)) {
    throw new ConfigurationError(
      'redis',
      `expected a URL or RedisStoreOptions, received ${describe(redis)}`,
    );
  }
  for (const name of Object.keys(redis)) {
    if (!REDIS_FIELDS.has(name)) {
      throw new ConfigurationError(
        `redis.${name}`,
        `unknown option; known options are ${[...REDIS_FIELDS].join(', ')}`,
      );
    }
  }
  if (redis['url'] !== undefined) assertRedisUrl(redis['url'], 'redis.url');
}

/**
 * `redis[s]://[[user]:password@]host[:port][/db]`, as ioredis reads it; anything else fails at
 * start.
 */
function assertRedisUrl(url: unknown, field: string): void {
  const expected = 'expected redis://[:password@]host[:port][/db] or rediss://…';
  if (typeof url !== 'string')
    throw new ConfigurationError(field, `${expected}, received ${describe(url)}`);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ConfigurationError(field, `${expected}, received ${describe(url)}: not a URL`);
  }
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') {
    throw new ConfigurationError(
      field,
      `${expected}, received ${describe(url)}: the scheme is ${parsed.protocol}`,
    );
  }
  if (parsed.hostname === '') {
    throw new ConfigurationError(field, `${expected}, received ${describe(url)}: no host`);
  }
  if (!/^(\/\d*)?$/.test(parsed.pathname)) {
    throw new ConfigurationError(
      field,
      `${expected}, received ${describe(url)}: the database is not a number`,
    );
  }
}

function assertMemory(memory: unknown, otherStore: boolean): void {
  if (otherStore) {
    throw new ConfigurationError(
      'memory',
      'configures the default memory store only; remove it, or remove store/redis',
    );
  }
  if (!isRecord(memory)) {
    throw new ConfigurationError('memory', `expected an object, received ${describe(memory)}`);
  }
  for (const name of Object.keys(memory)) {
    if (!MEMORY_FIELDS.has(name)) {
      throw new ConfigurationError(
        `memory.${name}`,
        `unknown option; known options are maxEntries`,
      );
    }
  }
  const { maxEntries, now } = memory;
  if (maxEntries !== undefined && !(Number.isInteger(maxEntries) && (maxEntries as number) >= 1)) {
    throw new ConfigurationError(
      'memory.maxEntries',
      `expected a positive integer, received ${describe(maxEntries)}`,
    );
  }
  if (now !== undefined && typeof now !== 'function') {
    throw new ConfigurationError(
      'memory.now',
      `expected a function returning epoch ms, received ${describe(now)}`,
    );
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return typeof value;
}
