import { ENTRY_FORMAT_VERSION } from '../../core/entry.js';
import type { AcquireOptions, InvalidationMode } from '../../core/herd-store.interface.js';
import { MAX_BROADCAST_ENVELOPE, keyPart } from './fill-message.js';
import type { RedisKeyLayout } from './redis-keys.js';

/**
 * Lua scripts, registered once per client with ioredis `defineCommand` (EVALSHA, with the NOSCRIPT
 * fallback after a Redis restart handled by ioredis). These scripts are the one place where a key's
 * order is decided: its version only grows, and only here.
 *
 * Each script names its KEYS and ARGV in its first lines, and its `args` function, right above,
 * lays a call out in that order: the only place the order is written on this side. Every key goes
 * through KEYS, never ARGV (Redis Cluster routes by KEYS; the keys of a cache key share a slot
 * with the clear marker it follows).
 */

/** A script, and how a call to it is laid out. */
export interface RedisScript<Call> {
  readonly numberOfKeys: number;
  /** The call's KEYS, then its ARGV. */
  readonly args: (call: Call) => readonly (string | number)[];
  readonly lua: string;
}

/** The KEYS and ARGV of a call to `script`, as its `args` lays them out. */
export type ScriptArgs<Script extends RedisScript<never>> = ReturnType<Script['args']>;

/** The cache key a script changes: its Redis keys, and the channel that tells other processes. */
export interface ScriptTarget {
  readonly key: string;
  readonly layout: RedisKeyLayout;
  readonly channel: string;
}

/** Redis takes whole milliseconds. */
/**
 * The longest TTL sent to Redis: 2^31 seconds (68 years). A longer one (a loader may choose any
 * finite lifetime) would not parse as PX's integer, and the value would not be stored at all.
 */
const MAX_TTL_MS = 2_147_483_648_000;

const wholeMs = (ms: number): number => Math.min(Math.ceil(ms), MAX_TTL_MS);

/**
 * How long a version key outlives its last change (1 hour): it only has to outlive the loads and
 * invalidations running on the key. A key holding a value carries the version in its envelope too,
 * and a lost version key restarts above Redis TIME, so versions keep growing.
 */
const VERSION_TTL_MS = 3_600_000;

/**
 * Advances the version at `key` and returns it as a string: one more than before, and never below
 * Redis's own clock in microseconds, so it keeps growing even if the version key was lost.
 */
const BUMP = `
local function bump(key)
  local time = redis.call('TIME')
  local micros = tonumber(time[1]) * 1000000 + tonumber(time[2])
  local previous = tonumber(redis.pcall('GET', key)) or 0
  local encoded = string.format('%.0f', math.max(previous + 1, micros))
  redis.call('SET', key, encoded, 'PX', ${VERSION_TTL_MS})
  return encoded
end
`;

/**
 * Publishes a notification `<kind>:<version>:<keyPart><body>`, the format fill-message.ts decodes
 * (see `decodeFillMessage`; `keyPart` is built there). `broadcastable` is the body of a message
 * about a written envelope: the envelope, unless it is longer than `maxBroadcast`
 * (MAX_BROADCAST_ENVELOPE) and followers read it with a GET.
 */
const NOTIFY = `
local function notify(channel, kind, version, keyPart, body)
  redis.call('PUBLISH', channel, kind .. ':' .. version .. ':' .. keyPart .. (body or ''))
end

local function broadcastable(envelope, maxBroadcast)
  if string.len(envelope) <= maxBroadcast then
    return envelope
  end
  return ''
end
`;

/**
 * The envelope header `{"v":<format>,"n":<version>,"i":<0|1>,`, always first and in this order
 * (see `WireEntry` and `encodeEntry` in lib/core/entry.ts), lets the scripts rewrite an envelope's
 * version and invalidated flag without parsing its value. `withHeader` returns the envelope under
 * `version`, with the invalidated flag set to `invalidated` when given (0 or 1); nil when the
 * envelope lacks the header (when `invalidated` is given, the flag included).
 */
const ENVELOPE_HEADER = `
local HEADER_TO_VERSION = '^({"v":%d+,"n":)%d+()'

local function hasHeader(envelope)
  return string.match(envelope, HEADER_TO_VERSION) ~= nil
end

local function withHeader(envelope, version, invalidated)
  local head, rest = string.match(envelope, HEADER_TO_VERSION)
  if not head then
    return nil
  end
  if invalidated == nil then
    return head .. version .. string.sub(envelope, rest)
  end
  local afterFlag = string.match(envelope, '^,"i":%d()', rest)
  if not afterFlag then
    return nil
  end
  return head .. version .. ',"i":' .. invalidated .. string.sub(envelope, afterFlag)
end
`;

/**
 * `isLaterFormat(key)`: whether the string at `key` is an envelope of a format later than this
 * release writes (`{"v":<format>,` with a greater format: a newer release wrote it during a rolling
 * deploy). Reads only its first bytes. Such an envelope is never replaced by a load here, and an
 * invalidation here deletes it rather than rewrite a header it does not know. Mirrors
 * `isLaterFormat` in lib/core/entry.ts.
 */
const LATER_FORMAT = `
local WRITER_FORMAT = ${ENTRY_FORMAT_VERSION}

local function isLaterFormat(key)
  local head = redis.pcall('GETRANGE', key, 0, 15)
  if type(head) ~= 'string' then
    return false
  end
  local format = tonumber(string.match(head, '^{"v":(%d+),'))
  return format ~= nil and format > WRITER_FORMAT
end
`;

/**
 * Clears (see CLEAR). The marker of a slot holds `<generation>:<deleted>`: the generation of the
 * last clear, and of the last clear that deleted. A key's `cleared` key holds the generation it
 * was last brought to. `settle(...)` applies to a key the clears it has not been through, as an
 * invalidation would (the version advances, the lease is revoked, the envelope is removed if a
 * delete came since, else marked stale) and returns the marker's generation (0: no clear ever).
 * Every script that reads or changes a key settles it first, so a clear is applied to each key,
 * atomically with its next touch, without listing the keys. `keepCleared` records the generation
 * for at least as long as the key's value lives: a key that forgot it would be cleared again.
 * Needs BUMP, ENVELOPE_HEADER and LATER_FORMAT.
 */
const SETTLE = `
local CLEARED_MIN_TTL_MS = ${VERSION_TTL_MS}

local function clearOf(markerKey)
  local marker = redis.pcall('GET', markerKey)
  if type(marker) ~= 'string' then
    return 0, 0
  end
  local generation, deleted = string.match(marker, '^(%d+):(%d+)$')
  return tonumber(generation) or 0, tonumber(deleted) or 0
end

local function keepCleared(clearedKey, generation, ttlMs)
  if generation > 0 then
    local keepMs = math.max(CLEARED_MIN_TTL_MS, tonumber(ttlMs) or 0)
    redis.call('SET', clearedKey, string.format('%.0f', generation), 'PX', keepMs)
  end
end

local function settle(valueKey, leaseKey, versionKey, clearedKey, markerKey)
  local generation, deleted = clearOf(markerKey)
  if generation == 0 then
    return 0
  end
  local applied = tonumber(redis.pcall('GET', clearedKey)) or 0
  if applied >= generation then
    return generation
  end
  local version = bump(versionKey)
  redis.call('DEL', leaseKey)
  if deleted > applied or isLaterFormat(valueKey) then
    redis.call('DEL', valueKey)
  else
    local current = redis.pcall('GET', valueKey)
    local stale = type(current) == 'string' and withHeader(current, version, 1)
    if stale then
      redis.call('SET', valueKey, stale, 'KEEPTTL')
    end
  end
  keepCleared(clearedKey, generation, redis.call('PTTL', valueKey))
  return generation
end
`;

/** Redis's own clock in milliseconds: index deadlines never depend on a pod's clock. */
const NOW_MS = `
local function nowMs()
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end
`;

/**
 * What a lease key holds once its load ended without a value to store (see END_LEASE): an outcome
 * record `o.<kind>.<fence>.<retryAtMs>.<failures>.<payload>` instead of a holder's token. `kind` is
 * `p` (a pass: hit-for-miss, payload the envelope its waiters take, or empty) or `f` (a failure,
 * payload its JSON; a lease is granted again from `retryAtMs` on Redis's clock). Parsed on this
 * side by `decodeOutcome` (redis.store.ts); keep the two in step. `outcomeOf(held)` returns the
 * kind and retry time of such a record, or nil for a holder's token.
 */
const OUTCOME = `
local function outcomeOf(held)
  if type(held) ~= 'string' then
    return nil
  end
  local kind, retryAt = string.match(held, '^o%.([pf])%.%d+%.(%d+)%.%d+%.')
  return kind, tonumber(retryAt)
end
`;

/** The Redis keys of a cache key that settle() reads and changes, in KEYS order after the first. */
const settleKeys = (layout: RedisKeyLayout) => [layout.cleared, layout.marker] as const;

export interface AcquireCall {
  readonly layout: RedisKeyLayout;
  readonly token: string;
  readonly ttlMs: number;
  /** Take the lease over if the key is still at this version (a lease's fence). */
  readonly takeoverFrom: number | undefined;
  readonly takeover: NonNullable<AcquireOptions['takeover']>;
}

/**
 * Grants the lease when it is free, or (takeover) when the key is still at the given version; a
 * lease taken over as stuck (its token starts with `s.`) is not taken over as stuck again, and an
 * outcome record (see OUTCOME) only by force: a failure's record lets one lease in once its retry
 * time has come. A grant advances the version, which is the lease's fence. A lease key holding
 * foreign data (not a string) is removed first. Returns {granted, version, envelope, repaired,
 * outcome}: the outcome record the key held when refused, or the failure's when granted after it
 * (false otherwise).
 */
export const ACQUIRE_LEASE = {
  numberOfKeys: 5,
  args: ({ layout, token, ttlMs, takeoverFrom, takeover }: AcquireCall) =>
    [
      layout.lease,
      layout.version,
      layout.value,
      ...settleKeys(layout),
      token,
      wholeMs(ttlMs),
      takeoverFrom === undefined ? '' : String(takeoverFrom),
      takeover,
    ] as const,
  lua: `${BUMP}${ENVELOPE_HEADER}${LATER_FORMAT}${SETTLE}${NOW_MS}${OUTCOME}
local leaseKey, versionKey, valueKey, clearedKey, markerKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
-- takeoverFrom: a version, or '' for none; takeover: 'stuck' or 'forced'.
local token, leaseTtlMs, takeoverFrom, takeover = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

local repaired = 0
local leaseType = redis.call('TYPE', leaseKey)['ok']
if leaseType ~= 'none' and leaseType ~= 'string' then
  redis.call('DEL', leaseKey)
  repaired = 1
end
settle(valueKey, leaseKey, versionKey, clearedKey, markerKey)
local current = redis.pcall('GET', valueKey)
if type(current) == 'table' then
  -- Foreign data (not a string) at the value key: report it as unreadable.
  current = 'herd-guard:foreign'
end
local version = redis.pcall('GET', versionKey)
if type(version) ~= 'string' then
  version = '0'
end
-- A token taken over as stuck (s.<fence>.) lets that holder store its value while it holds: granted
-- only while the key is at that holder's version. An invalidation since (which revoked the holder's
-- lease) fences the holder; the follower asks again without a takeover.
local held = redis.call('GET', leaseKey)
local kind, retryAt = outcomeOf(held)
if string.sub(token, 1, 2) == 's.' and tonumber(takeoverFrom) ~= tonumber(version) then
  return {0, version, current, repaired, kind and held or false}
end
local failed = false
if kind == 'f' and nowMs() >= retryAt then
  -- The backoff is over: one lease may go in, and counts the failures on.
  redis.call('DEL', leaseKey)
  failed = held
end
local granted = redis.call('SET', leaseKey, token, 'NX', 'PX', leaseTtlMs)
if not granted and takeoverFrom ~= '' and tonumber(takeoverFrom) == tonumber(version) then
  local holder = held or ''
  local stuck = string.sub(holder, 1, 2) == 's.' or kind ~= nil
  if takeover ~= 'stuck' or not stuck then
    redis.call('SET', leaseKey, token, 'PX', leaseTtlMs)
    granted = true
    if kind == 'f' then
      failed = held
    end
  end
end
if not granted then
  return {0, version, current, repaired, kind and held or false}
end
return {1, bump(versionKey), current, repaired, failed}
`,
} satisfies RedisScript<AcquireCall>;

export interface FillCall {
  readonly target: ScriptTarget;
  readonly envelope: string;
  readonly ttlMs: number;
  /** The fence of the lease the load held. */
  readonly fence: number;
  readonly token: string;
}

/**
 * Writes the envelope only if the key is still at the fence's version (no invalidation, no other
 * grant since the load began), or if the only change since is the lease taken over as stuck from
 * this fence and still held (token `s.<fence>.`: the slow holder's value is as good, and earlier):
 * then under the current version; and never over an envelope of a later format. A load beside a
 * pass outcome (token `o.p.<fence>.`) writes only while that outcome is held. Releases the lease
 * if the token still holds it, and notifies (with the envelope when written). Returns 1 if written.
 */
export const FILL = {
  numberOfKeys: 5,
  args: ({ target, envelope, ttlMs, fence, token }: FillCall) =>
    [
      target.layout.value,
      target.layout.lease,
      target.layout.version,
      ...settleKeys(target.layout),
      envelope,
      wholeMs(ttlMs),
      String(fence),
      token,
      target.channel,
      keyPart(target.key),
      MAX_BROADCAST_ENVELOPE,
    ] as const,
  lua: `${BUMP}${NOTIFY}${ENVELOPE_HEADER}${LATER_FORMAT}${SETTLE}
local valueKey, leaseKey, versionKey, clearedKey, markerKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local envelope, ttlMs, fence, token = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local channel, keyPart, maxBroadcast = ARGV[5], ARGV[6], tonumber(ARGV[7])

-- A clear since the grant revokes the lease and advances the version: the load is fenced.
local generation = settle(valueKey, leaseKey, versionKey, clearedKey, markerKey)
local version = redis.pcall('GET', versionKey)
local lease = redis.pcall('GET', leaseKey)
local stored = nil
if isLaterFormat(valueKey) then
  stored = nil
elseif string.sub(token, 1, 4) == 'o.p.' then
  -- Loaded beside a pass outcome (passLease): stored only while that outcome is held.
  if tonumber(version) == tonumber(fence) and type(lease) == 'string' and
      string.sub(lease, 1, string.len(token)) == token then
    stored = envelope
  end
elseif tonumber(version) == tonumber(fence) then
  stored = envelope
elseif type(lease) == 'string' and type(version) == 'string' then
  -- Taken over as stuck from this fence (the token RedisStore.acquireLease builds) and still held,
  -- or ended by that takeover's failure (which names this fence, see END_LEASE).
  local rescuer = 's.' .. fence .. '.'
  local failedTakeover = 'o.f.' .. version .. '.'
  local naming = ',"r":"' .. fence .. '"}'
  if string.sub(lease, 1, string.len(rescuer)) == rescuer or
      (string.sub(lease, 1, string.len(failedTakeover)) == failedTakeover and
        string.sub(lease, -string.len(naming)) == naming) then
    stored = withHeader(envelope, version)
  end
end
if stored then
  redis.call('SET', valueKey, stored, 'PX', ttlMs)
  keepCleared(clearedKey, generation, ttlMs)
end
local released = lease == token
-- Once the value is stored, an outcome record the rescued holder left is over too.
if released or (stored and type(lease) == 'string' and string.sub(lease, 1, 2) == 'o.') then
  redis.call('DEL', leaseKey)
end
if stored then
  notify(channel, 'f', version, keyPart, broadcastable(stored, maxBroadcast))
  return 1
end
if released then
  notify(channel, 'r', fence, keyPart)
end
return 0
`,
} satisfies RedisScript<FillCall>;

export interface SetCall {
  readonly target: ScriptTarget;
  /** Any version in its header: the script writes it under the new one. */
  readonly envelope: string;
  readonly ttlMs: number;
}

/**
 * A write-through: advances the version, writes the envelope under it, revokes any lease (fencing
 * running loads) and notifies. Returns the new version.
 */
export const SET_VALUE = {
  numberOfKeys: 5,
  args: ({ target, envelope, ttlMs }: SetCall) =>
    [
      target.layout.value,
      target.layout.lease,
      target.layout.version,
      ...settleKeys(target.layout),
      envelope,
      wholeMs(ttlMs),
      target.channel,
      keyPart(target.key),
      MAX_BROADCAST_ENVELOPE,
    ] as const,
  lua: `${BUMP}${NOTIFY}${ENVELOPE_HEADER}${SETTLE}
local valueKey, leaseKey, versionKey, clearedKey, markerKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local envelope, ttlMs, channel, keyPart, maxBroadcast = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])

-- Checked before the version advances: a malformed envelope changes nothing.
if not hasHeader(envelope) then
  return redis.error_reply('ERR herd-guard: malformed envelope')
end
local version = bump(versionKey)
local stored = withHeader(envelope, version)
redis.call('SET', valueKey, stored, 'PX', ttlMs)
redis.call('DEL', leaseKey)
-- Written after every clear so far: none applies to it.
keepCleared(clearedKey, clearOf(markerKey), ttlMs)
notify(channel, 'w', version, keyPart, broadcastable(stored, maxBroadcast))
return version
`,
} satisfies RedisScript<SetCall>;

export interface InvalidateCall {
  readonly target: ScriptTarget;
  readonly mode: InvalidationMode;
}

/**
 * Advances the version (also for an absent key, so running loads are fenced), revokes any lease,
 * then marks the envelope stale (rewriting only its header: version and invalidated flag, keeping
 * its TTL) or deletes it, and notifies. An envelope of a later format is deleted either way: its
 * header is not this release's to rewrite. Returns {existed, version}.
 */
export const INVALIDATE = {
  numberOfKeys: 5,
  args: ({ target, mode }: InvalidateCall) =>
    [
      target.layout.value,
      target.layout.lease,
      target.layout.version,
      ...settleKeys(target.layout),
      mode,
      target.channel,
      keyPart(target.key),
    ] as const,
  lua: `${BUMP}${NOTIFY}${ENVELOPE_HEADER}${LATER_FORMAT}${SETTLE}
local valueKey, leaseKey, versionKey, clearedKey, markerKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
-- mode: 'stale' or 'delete'.
local mode, channel, keyPart = ARGV[1], ARGV[2], ARGV[3]

settle(valueKey, leaseKey, versionKey, clearedKey, markerKey)
local version = bump(versionKey)
redis.call('DEL', leaseKey)
if mode == 'delete' or isLaterFormat(valueKey) then
  local existed = redis.call('DEL', valueKey)
  notify(channel, 'd', version, keyPart)
  return {existed, version}
end
local existed = 0
local current = redis.pcall('GET', valueKey)
if type(current) == 'string' then
  local stale = withHeader(current, version, 1)
  if stale then
    redis.call('SET', valueKey, stale, 'KEEPTTL')
    existed = 1
  end
end
notify(channel, 's', version, keyPart)
return {existed, version}
`,
} satisfies RedisScript<InvalidateCall>;

export interface SettleReadCall {
  readonly layout: RedisKeyLayout;
}

/**
 * A read of a key that has a clear to apply (its MGET saw the marker ahead of the key): applies it,
 * then returns {envelope, version} as the MGET would.
 */
export const SETTLE_READ = {
  numberOfKeys: 5,
  args: ({ layout }: SettleReadCall) =>
    [layout.value, layout.lease, layout.version, ...settleKeys(layout)] as const,
  lua: `${BUMP}${ENVELOPE_HEADER}${LATER_FORMAT}${SETTLE}
local valueKey, leaseKey, versionKey, clearedKey, markerKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]

settle(valueKey, leaseKey, versionKey, clearedKey, markerKey)
local current = redis.pcall('GET', valueKey)
if type(current) == 'table' then
  current = 'herd-guard:foreign'
end
return {current, redis.pcall('GET', versionKey)}
`,
} satisfies RedisScript<SettleReadCall>;

export interface ClearCall {
  /** The clear marker written (one of RedisKeys.markers()). */
  readonly marker: string;
  readonly mode: InvalidationMode;
  /** The channel told of the clear in the same step (`c:<generation>`), or none. */
  readonly channel?: string;
}

/**
 * Records a clear in a marker: a new generation (one more than before, never below Redis's clock
 * in microseconds, so it keeps growing even if the marker was lost), and, for `delete`, the same
 * number as the last deleting one. The keys follow it as they are touched (see SETTLE). With a
 * channel, publishes the clear there in the same step. Returns the generation.
 */
export const CLEAR = {
  numberOfKeys: 1,
  args: ({ marker, mode, channel }: ClearCall) => [marker, mode, channel ?? ''] as const,
  lua: `${BUMP}${ENVELOPE_HEADER}${LATER_FORMAT}${SETTLE}
local markerKey = KEYS[1]
-- mode: 'stale' or 'delete'.
local mode = ARGV[1]

local previous, deleted = clearOf(markerKey)
local time = redis.call('TIME')
local micros = tonumber(time[1]) * 1000000 + tonumber(time[2])
local generation = math.max(previous + 1, micros)
if mode == 'delete' then
  deleted = generation
end
redis.call('SET', markerKey, string.format('%.0f:%.0f', generation, deleted))
-- Told in the same step as the marker is written: no clear without its notification.
if ARGV[2] ~= '' then
  redis.call('PUBLISH', ARGV[2], 'c:' .. string.format('%.0f', generation))
end
return string.format('%.0f', generation)
`,
} satisfies RedisScript<ClearCall>;

export interface ReleaseCall {
  readonly target: ScriptTarget;
  readonly token: string;
  readonly fence: number;
}

/** Deletes the lease only if the token still owns it, and notifies. Returns 1 if deleted. */
export const RELEASE_LEASE = {
  numberOfKeys: 1,
  args: ({ target, token, fence }: ReleaseCall) =>
    [target.layout.lease, token, target.channel, keyPart(target.key), String(fence)] as const,
  lua: `${NOTIFY}
local leaseKey = KEYS[1]
local token, channel, keyPart, fence = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

if redis.call('GET', leaseKey) == token then
  redis.call('DEL', leaseKey)
  notify(channel, 'r', fence, keyPart)
  return 1
end
return 0
`,
} satisfies RedisScript<ReleaseCall>;

export interface EndLeaseCall {
  readonly target: ScriptTarget;
  readonly token: string;
  readonly fence: number;
  /** `p` (pass) or `f` (failed), see OUTCOME. */
  readonly kind: 'p' | 'f';
  readonly holdMs: number;
  readonly rememberMs: number;
  readonly failures: number;
  readonly payload: string;
}

/**
 * Replaces the lease with its load's outcome record (see OUTCOME) if the token still owns it (after
 * applying a clear, which revokes it), or if it was taken over as stuck from this fence and is still
 * held (then at the current version): a pass for `holdMs`; a failure whose retry time is `holdMs`
 * from now, kept `rememberMs` longer. Notifies as a release. Returns 1 if written.
 */
export const END_LEASE = {
  numberOfKeys: 5,
  args: ({ target, token, fence, kind, holdMs, rememberMs, failures, payload }: EndLeaseCall) =>
    [
      target.layout.lease,
      target.layout.value,
      target.layout.version,
      ...settleKeys(target.layout),
      token,
      String(fence),
      kind,
      wholeMs(holdMs),
      wholeMs(rememberMs),
      String(failures),
      payload,
      target.channel,
      keyPart(target.key),
    ] as const,
  lua: `${BUMP}${NOTIFY}${ENVELOPE_HEADER}${LATER_FORMAT}${SETTLE}${NOW_MS}
local leaseKey, valueKey, versionKey, clearedKey, markerKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local token, fence, kind, holdMs, rememberMs = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local failures, payload, channel, keyPart = ARGV[6], ARGV[7], ARGV[8], ARGV[9]

settle(valueKey, leaseKey, versionKey, clearedKey, markerKey)
local lease = redis.call('GET', leaseKey)
if lease ~= token then
  -- The holder a takeover rescued (token s.<fence>.) still ends the load, at the takeover's fence:
  -- the first result answers every waiter.
  local rescuer = 's.' .. fence .. '.'
  if type(lease) ~= 'string' or string.sub(lease, 1, string.len(rescuer)) ~= rescuer then
    return 0
  end
  fence = redis.call('GET', versionKey) or fence
end
local retryAt, ttlMs = 0, holdMs
if kind == 'f' then
  retryAt = nowMs() + holdMs
  ttlMs = holdMs + rememberMs
  -- A takeover's failure names the holder it rescued (its fence, as "r", last in the JSON), which
  -- may still store its value over it (see FILL).
  local rescued = lease == token and string.match(token, '^s%.(%d+)%.')
  if rescued and string.sub(payload, -1) == '}' then
    payload = string.sub(payload, 1, -2) .. ',"r":"' .. rescued .. '"}'
  end
end
local record = 'o.' .. kind .. '.' .. fence .. '.' .. string.format('%.0f', retryAt) .. '.' .. failures .. '.' .. payload
redis.call('SET', leaseKey, record, 'PX', math.max(1, ttlMs))
notify(channel, 'r', fence, keyPart)
return 1
`,
} satisfies RedisScript<EndLeaseCall>;

export interface HedgeCall {
  /** The reports of the asking processes (a hash) and the hedges that count (a sorted set). */
  readonly reports: string;
  readonly granted: string;
  readonly process: string;
  readonly loads: number;
  readonly ticket: string;
  readonly countsForMs: number;
  readonly reportMs: number;
  readonly loadsPerHedge: number;
  readonly minimum: number;
}

/**
 * The cluster's hedge budget (see lib/core/hedge-budget.ts, which this mirrors): records the
 * process's running loads (on Redis's clock), sums the reports younger than `reportMs`, and grants
 * the hedge (counted until `countsForMs` from now) while fewer count than
 * max(minimum, floor(loads / loadsPerHedge)). Both keys expire with what they hold. Returns 1 if
 * granted.
 */
export const HEDGE = {
  numberOfKeys: 2,
  args: (call: HedgeCall) =>
    [
      call.reports,
      call.granted,
      call.process,
      String(call.loads),
      call.ticket,
      wholeMs(call.countsForMs),
      wholeMs(call.reportMs),
      String(call.loadsPerHedge),
      String(call.minimum),
    ] as const,
  lua: `${NOW_MS}
local reportsKey, grantedKey = KEYS[1], KEYS[2]
local process, loads, ticket, countsForMs = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local reportMs, loadsPerHedge, minimum = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])

local now = nowMs()
redis.call('HSET', reportsKey, process, string.format('%d:%.0f', loads, now))
local total = 0
local reports = redis.call('HGETALL', reportsKey)
for i = 1, #reports, 2 do
  local count, at = string.match(reports[i + 1], '^(%d+):(%d+)$')
  if count == nil or tonumber(at) + reportMs <= now then
    redis.call('HDEL', reportsKey, reports[i])
  else
    total = total + tonumber(count)
  end
end
redis.call('PEXPIRE', reportsKey, reportMs)
redis.call('ZREMRANGEBYSCORE', grantedKey, '-inf', now)
local granted = 0
if redis.call('ZCARD', grantedKey) < math.max(minimum, math.floor(total / loadsPerHedge)) then
  redis.call('ZADD', grantedKey, string.format('%.0f', now + countsForMs), ticket)
  granted = 1
end
local last = redis.call('ZRANGE', grantedKey, -1, -1, 'WITHSCORES')
if last[2] then
  redis.call('PEXPIREAT', grantedKey, last[2])
end
return granted
`,
} satisfies RedisScript<HedgeCall>;

export interface ExtendCall {
  readonly layout: RedisKeyLayout;
  readonly token: string;
  readonly ttlMs: number;
}

/**
 * Extends the lease only if the token still owns it (after applying a clear, which revokes it).
 * Returns 1 if extended.
 */
export const EXTEND_LEASE = {
  numberOfKeys: 5,
  args: ({ layout, token, ttlMs }: ExtendCall) =>
    [
      layout.lease,
      layout.value,
      layout.version,
      ...settleKeys(layout),
      token,
      wholeMs(ttlMs),
    ] as const,
  lua: `${BUMP}${ENVELOPE_HEADER}${LATER_FORMAT}${SETTLE}
local leaseKey, valueKey, versionKey, clearedKey, markerKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local token, ttlMs = ARGV[1], ARGV[2]

-- A clear since the grant revokes the lease: the holder learns it here.
settle(valueKey, leaseKey, versionKey, clearedKey, markerKey)

if redis.call('GET', leaseKey) == token then
  return redis.call('PEXPIRE', leaseKey, ttlMs)
end
return 0
`,
} satisfies RedisScript<ExtendCall>;

export interface IndexCall {
  /** The index's Redis key (a sorted set). */
  readonly index: string;
  /** The cache key recorded. */
  readonly member: string;
  readonly ttlMs: number;
}

/**
 * Records the member until the later of its deadlines (on Redis's clock), drops members past
 * theirs, and keeps the set alive as long as its longest member. Returns 1.
 */
export const ADD_TO_INDEX = {
  numberOfKeys: 1,
  args: ({ index, member, ttlMs }: IndexCall) => [index, member, wholeMs(ttlMs)] as const,
  lua: `${NOW_MS}
local indexKey = KEYS[1]
local member, ttlMs = ARGV[1], tonumber(ARGV[2])

local now = nowMs()
redis.call('ZADD', indexKey, 'GT', string.format('%.0f', now + ttlMs), member)
redis.call('ZREMRANGEBYSCORE', indexKey, '-inf', now)
local last = redis.call('ZRANGE', indexKey, -1, -1, 'WITHSCORES')
if last[2] then
  redis.call('PEXPIREAT', indexKey, last[2])
end
return 1
`,
} satisfies RedisScript<IndexCall>;

export interface IndexMembersCall {
  readonly index: string;
  /** When the index was last invalidated (a string key in the index's slot). */
  readonly invalidatedAt: string;
  /** How long that time is kept; 0: not noted (an index of derived values). */
  readonly keptMs: number;
}

/** Redis's clock in microseconds (an exact integer in a Lua number). */
const NOW_US = `
local function nowUs()
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000000 + tonumber(time[2])
end
`;

/**
 * The members whose deadline (on Redis's clock) has not passed, read to invalidate them: the time
 * (µs) is noted for {@link INVALIDATED_AT}.
 */
export const INDEX_MEMBERS = {
  numberOfKeys: 2,
  args: ({ index, invalidatedAt, keptMs }: IndexMembersCall) =>
    [index, invalidatedAt, wholeMs(keptMs)] as const,
  lua: `${NOW_US}
local indexKey, invalidatedAtKey = KEYS[1], KEYS[2]
local keptMs = ARGV[1]

local now = nowUs()
if tonumber(keptMs) > 0 then
  redis.call('SET', invalidatedAtKey, string.format('%.0f', now), 'PX', keptMs)
end
return redis.call('ZRANGEBYSCORE', indexKey, string.format('%.0f', math.floor(now / 1000)), '+inf')
`,
} satisfies RedisScript<IndexMembersCall>;

export interface InvalidatedAtCall {
  /** The key INDEX_MEMBERS notes the index's last invalidation in. */
  readonly invalidatedAt: string;
}

/**
 * Redis's clock now and the time the index was last invalidated, both in µs (-1: not within the
 * time kept), from one node: the caller compares them with a duration it measured.
 */
export const INVALIDATED_AT = {
  numberOfKeys: 1,
  args: ({ invalidatedAt }: InvalidatedAtCall) => [invalidatedAt] as const,
  lua: `${NOW_US}
local invalidatedAtKey = KEYS[1]

return {nowUs(), tonumber(redis.call('GET', invalidatedAtKey) or '-1') or -1}
`,
} satisfies RedisScript<InvalidatedAtCall>;
