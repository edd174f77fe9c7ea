import { ConfigurationError } from '../errors/configuration.error.js';
import { type Duration, parseDuration, parseTimerDuration } from './duration.js';
import { SERIALIZERS, type SerializerName } from './serializers.js';

/**
 * What to do when another process holds the lease, nothing is servable, and `waitTimeout` passes.
 */
export type WaitTimeoutAction = 'error' | 'load';

/** How a key behaves in the cache. Durations are milliseconds or strings with a unit (`'30s'`). */
export interface CachePolicy {
  /** Fresh for this long after a load. Default `'30s'`. */
  readonly soft?: Duration;
  /**
   * Never served after this long. Between soft and hard the value is stale but servable. Default
   * `10 × soft`.
   */
  readonly hard?: Duration;
  /**
   * Random extra time added to soft and hard so keys written together do not expire together:
   * a fraction of each TTL (`0.1` = up to +10 %) or a duration (`'5s'`). Default `0.1`.
   */
  readonly jitter?: number | Duration;
  /**
   * How long a `null`/`undefined` result ("not found") is cached. `0` disables. Default `'10s'`.
   */
  readonly negativeTtl?: Duration;
  /** Lifetime of the fill lease; the owner extends it while its loader runs. Default `'5s'`. */
  readonly leaseTtl?: Duration;
  /** How long a caller with nothing servable waits for another process's fill. Default `'5s'`. */
  readonly waitTimeout?: Duration;
  /**
   * On lease wait timeout with nothing servable: throw `UpstreamUnavailableError` or load anyway.
   * Default `'error'`.
   */
  readonly onWaitTimeout?: WaitTimeoutAction;
  /** Serve stale values at once and refresh in the background. Default `true`. */
  readonly staleWhileRevalidate?: boolean;
  /**
   * When callers wait on a refresh of a stale value (`staleWhileRevalidate: false`), give them the
   * stale value after this long; the load goes on in the background. Default: off.
   */
  readonly loaderSoftTimeout?: Duration | false;
  /** Abort the loader (its signal fires) after this long. Default `'30s'`; `false` disables. */
  readonly loaderHardTimeout?: Duration | false;
  /**
   * Delay between refresh attempts of a key whose loader keeps failing: exponential, with jitter.
   */
  readonly backoff?: BackoffPolicy;
  /**
   * Probabilistic early refresh (XFetch): refresh a fresh key before its soft expiry with a chance
   * that grows as expiry nears. `true` means beta 1; a number is beta (higher refreshes earlier).
   * Default off.
   */
  readonly earlyRefresh?: boolean | number;
  /**
   * How values are stored: `'v8'` keeps `Date`, `Buffer`, `Map`, `Set`, `BigInt`... (class
   * instances
   * come back as plain objects); `'json'` is strict JSON and refuses at write time a value it would
   * change. Either way every pod, the loading one included, reads back the same value. Default
   * `'v8'`.
   */
  readonly serializer?: SerializerName;
}

export interface BackoffPolicy {
  /** First delay after a failure. Default `'1s'`. */
  readonly initial?: Duration;
  /** Upper bound of the delay. Default `'30s'`. */
  readonly max?: Duration;
}

/** A {@link CachePolicy} with every field validated and every duration in milliseconds. */
export interface ResolvedPolicy {
  readonly softMs: number;
  readonly hardMs: number;
  readonly jitter: Jitter;
  readonly negativeTtlMs: number;
  readonly leaseTtlMs: number;
  readonly waitTimeoutMs: number;
  readonly onWaitTimeout: WaitTimeoutAction;
  readonly staleWhileRevalidate: boolean;
  readonly loaderSoftTimeoutMs: number | undefined;
  readonly loaderHardTimeoutMs: number | undefined;
  readonly backoffInitialMs: number;
  readonly backoffMaxMs: number;
  /** XFetch beta; 0 when early refresh is off. */
  readonly earlyRefreshBeta: number;
  readonly serializer: SerializerName;
}

export type Jitter =
  | { readonly kind: 'fraction'; readonly fraction: number }
  | { readonly kind: 'duration'; readonly ms: number };

const POLICY_FIELDS: ReadonlySet<string> = new Set([
  'soft',
  'hard',
  'jitter',
  'negativeTtl',
  'leaseTtl',
  'waitTimeout',
  'onWaitTimeout',
  'staleWhileRevalidate',
  'loaderSoftTimeout',
  'loaderHardTimeout',
  'backoff',
  'earlyRefresh',
  'serializer',
]);

export const DEFAULT_POLICY: Readonly<CachePolicy> = Object.freeze({
  soft: '30s',
  jitter: 0.1,
  negativeTtl: '10s',
  leaseTtl: '5s',
  waitTimeout: '5s',
  onWaitTimeout: 'error',
  staleWhileRevalidate: true,
  loaderSoftTimeout: false,
  loaderHardTimeout: '30s',
  backoff: Object.freeze({ initial: '1s', max: '30s' }),
  earlyRefresh: false,
  serializer: 'v8',
});

/**
 * Validates `policy` layered over `base` (both optional) and returns it in milliseconds.
 * `prefix` names the option in errors (e.g. `policy` gives `policy.hard`).
 */
export function resolvePolicy(
  policy: CachePolicy | undefined,
  base: CachePolicy = DEFAULT_POLICY,
  prefix = 'policy',
): ResolvedPolicy {
  assertPolicyShape(policy, prefix);
  assertPolicyShape(base, prefix);
  const merged: CachePolicy = { ...DEFAULT_POLICY, ...base, ...policy };
  const field = (name: string): string => `${prefix}.${name}`;

  const softMs = positive(parseDuration(merged.soft, field('soft')), field('soft'));
  const hardMs =
    merged.hard === undefined ? softMs * 10 : parseDuration(merged.hard, field('hard'));
  if (hardMs < softMs) {
    throw new ConfigurationError(
      field('hard'),
      `must be >= soft (${softMs} ms), received ${hardMs} ms`,
    );
  }
  const backoff = { ...DEFAULT_POLICY.backoff, ...base.backoff, ...policy?.backoff };
  const backoffInitialMs = positive(
    parseDuration(backoff.initial, field('backoff.initial')),
    field('backoff.initial'),
  );
  const backoffMaxMs = parseDuration(backoff.max, field('backoff.max'));
  if (backoffMaxMs < backoffInitialMs) {
    throw new ConfigurationError(
      field('backoff.max'),
      `must be >= backoff.initial (${backoffInitialMs} ms), received ${backoffMaxMs} ms`,
    );
  }
  return {
    softMs,
    hardMs,
    jitter: parseJitter(merged.jitter, field('jitter')),
    negativeTtlMs: parseDuration(merged.negativeTtl, field('negativeTtl')),
    leaseTtlMs: positive(parseTimerDuration(merged.leaseTtl, field('leaseTtl')), field('leaseTtl')),
    waitTimeoutMs: parseTimerDuration(merged.waitTimeout, field('waitTimeout')),
    onWaitTimeout: parseWaitTimeoutAction(merged.onWaitTimeout, field('onWaitTimeout')),
    staleWhileRevalidate: parseBoolean(merged.staleWhileRevalidate, field('staleWhileRevalidate')),
    loaderSoftTimeoutMs: optionalDuration(merged.loaderSoftTimeout, field('loaderSoftTimeout')),
    loaderHardTimeoutMs: optionalDuration(merged.loaderHardTimeout, field('loaderHardTimeout')),
    backoffInitialMs,
    backoffMaxMs,
    earlyRefreshBeta: parseEarlyRefresh(merged.earlyRefresh, field('earlyRefresh')),
    serializer: parseSerializer(merged.serializer, field('serializer')),
  };
}

function assertPolicyShape(policy: unknown, prefix: string): void {
  if (policy === undefined) return;
  if (typeof policy !== 'object' || policy === null || Array.isArray(policy)) {
    throw new ConfigurationError(
      prefix,
      `expected an object, received ${policy === null ? 'null' : typeof policy}`,
    );
  }
  for (const name of Object.keys(policy)) {
    if (!POLICY_FIELDS.has(name)) {
      throw new ConfigurationError(
        `${prefix}.${name}`,
        `unknown option; known options are ${[...POLICY_FIELDS].join(', ')}`,
      );
    }
  }
}

function positive(ms: number, field: string): number {
  if (ms <= 0) throw new ConfigurationError(field, `must be greater than 0, received ${ms} ms`);
  return ms;
}

function optionalDuration(input: Duration | false | undefined, field: string): number | undefined {
  if (input === false || input === undefined) return undefined;
  return positive(parseTimerDuration(input, field), field);
}

function parseJitter(input: unknown, field: string): Jitter {
  if (typeof input === 'number') {
    if (!Number.isFinite(input) || input < 0 || input > 1) {
      throw new ConfigurationError(
        field,
        `a number is a fraction of the TTL between 0 and 1 (use a string such as '5s' for a duration), received ${input}`,
      );
    }
    return { kind: 'fraction', fraction: input };
  }
  return { kind: 'duration', ms: parseDuration(input, field) };
}

function parseBoolean(input: unknown, field: string): boolean {
  if (typeof input !== 'boolean')
    throw new ConfigurationError(field, `expected true or false, received ${typeof input}`);
  return input;
}

function parseWaitTimeoutAction(input: unknown, field: string): WaitTimeoutAction {
  if (input !== 'error' && input !== 'load') {
    throw new ConfigurationError(
      field,
      `expected 'error' or 'load', received ${JSON.stringify(input)}`,
    );
  }
  return input;
}

function parseSerializer(input: unknown, field: string): SerializerName {
  if (!SERIALIZERS.includes(input as SerializerName)) {
    throw new ConfigurationError(
      field,
      `expected 'v8' or 'json', received ${JSON.stringify(input)}`,
    );
  }
  return input as SerializerName;
}

function parseEarlyRefresh(input: unknown, field: string): number {
  if (input === false) return 0;
  if (input === true) return 1;
  if (typeof input === 'number' && Number.isFinite(input) && input > 0) return input;
  throw new ConfigurationError(
    field,
    `expected true, false or a beta > 0, received ${JSON.stringify(input)}`,
  );
}

/**
 * Soft and hard expiry for a value loaded at `now`; one random draw spreads both so soft <= hard
 * holds.
 */
export function expiryFor(
  policy: ResolvedPolicy,
  now: number,
  negative: boolean,
  random: () => number,
): { softExpireAt: number; hardExpireAt: number } {
  if (negative) {
    const at = now + policy.negativeTtlMs;
    return { softExpireAt: at, hardExpireAt: at };
  }
  const draw = random();
  const spread = (ttlMs: number): number =>
    policy.jitter.kind === 'fraction'
      ? ttlMs * policy.jitter.fraction * draw
      : policy.jitter.ms * draw;
  return {
    softExpireAt: Math.round(now + policy.softMs + spread(policy.softMs)),
    hardExpireAt: Math.round(now + policy.hardMs + spread(policy.hardMs)),
  };
}

/**
 * XFetch (Vattani et al., 2015): refresh early when `now - delta * beta * ln(rand) >=
 * softExpireAt`.
 * `delta` is the duration of the last load; a longer load starts earlier.
 */
export function shouldRefreshEarly(
  policy: ResolvedPolicy,
  softExpireAt: number,
  loadMs: number,
  now: number,
  random: () => number,
): boolean {
  if (policy.earlyRefreshBeta === 0 || loadMs <= 0) return false;
  return now - loadMs * policy.earlyRefreshBeta * Math.log(random()) >= softExpireAt;
}

/** Assumed longest load when `loaderHardTimeout` is off, for how long indexes keep a key. */
const UNBOUNDED_LOAD_MS = 86_400_000;

/**
 * The longest a value loaded under `policy` may live, counted from the start of its load: the
 * load itself (up to `loaderHardTimeout`) plus the hard TTL with its largest jitter. Tag and input
 * indexes keep a key this long.
 */
export function maxLifetimeMs(policy: ResolvedPolicy): number {
  const jitterMs =
    policy.jitter.kind === 'fraction' ? policy.hardMs * policy.jitter.fraction : policy.jitter.ms;
  return (policy.loaderHardTimeoutMs ?? UNBOUNDED_LOAD_MS) + policy.hardMs + jitterMs;
}
