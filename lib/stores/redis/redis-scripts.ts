/**
 * Lua scripts, registered once per client with ioredis `defineCommand` (EVALSHA, with the NOSCRIPT
 * fallback after a Redis restart handled by ioredis). Every key goes through KEYS. These scripts
 * are the one place where a key's order is decided: its version only grows, and only here.
 */

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

/** A notification: `<kind>:<version>:` then the key part built by the client (see fill-message.ts). */
const NOTIFY = `
local function notify(channel, kind, version, keyPart, body)
  redis.call('PUBLISH', channel, kind .. ':' .. version .. ':' .. keyPart .. (body or ''))
end
`;

/**
 * KEYS: lease, version, value. ARGV: token, lease ttl ms, version to take over from ('' for none),
 * takeover kind ('stuck' or 'forced'). Grants the lease when it is free, or (takeover) when the key
 * is still at the given version; a lease taken over as stuck (its token starts with `s.`) is not
 * taken over as stuck again. A grant advances the version, which is the lease's fence. A lease key
 * holding foreign data (not a string) is removed first. Returns {granted, version, envelope, repaired}.
 */
export const ACQUIRE_LEASE = `${BUMP}
local repaired = 0
local leaseType = redis.call('TYPE', KEYS[1])['ok']
if leaseType ~= 'none' and leaseType ~= 'string' then
  redis.call('DEL', KEYS[1])
  repaired = 1
end
local current = redis.pcall('GET', KEYS[3])
if type(current) == 'table' then
  -- Foreign data (not a string) at the value key: report it as unreadable.
  current = 'herd-guard:foreign'
end
local version = redis.pcall('GET', KEYS[2])
if type(version) ~= 'string' then
  version = '0'
end
local granted = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
if not granted and ARGV[3] ~= '' and tonumber(ARGV[3]) == tonumber(version) then
  local holder = redis.call('GET', KEYS[1]) or ''
  if ARGV[4] ~= 'stuck' or string.sub(holder, 1, 2) ~= 's.' then
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
    granted = true
  end
end
if not granted then
  return {0, version, current, repaired}
end
return {1, bump(KEYS[2]), current, repaired}
`;

/**
 * KEYS: value, lease, version. ARGV: envelope, px ms, fence, token, channel, key part, max
 * broadcast length. Writes the envelope only if the key is still at the fence's version (no
 * invalidation, no other grant since the load began), or if the only change since is the lease
 * taken over as stuck from this fence and still held (token `s.<fence>.`: the slow holder's value
 * is as good, and earlier): then under the current version. Releases the lease if the token still
 * holds it, and notifies (with the envelope when written). Returns 1 if written.
 */
export const FILL = `${NOTIFY}
local written = 0
local envelope = ARGV[1]
local version = redis.pcall('GET', KEYS[3])
local lease = redis.pcall('GET', KEYS[2])
if tonumber(version) == tonumber(ARGV[3]) then
  written = 1
elseif type(lease) == 'string' and type(version) == 'string' then
  local rescuer = 's.' .. ARGV[3] .. '.'
  local head, rest = string.match(envelope, '^({"v":%d+,"n":)%d+()')
  if head and string.sub(lease, 1, string.len(rescuer)) == rescuer then
    envelope = head .. version .. string.sub(envelope, rest)
    written = 1
  end
end
if written == 1 then
  redis.call('SET', KEYS[1], envelope, 'PX', ARGV[2])
end
local released = 0
if lease == ARGV[4] then
  redis.call('DEL', KEYS[2])
  released = 1
end
if written == 1 then
  local body = ''
  if string.len(envelope) <= tonumber(ARGV[7]) then
    body = envelope
  end
  notify(ARGV[5], 'f', version, ARGV[6], body)
elseif released == 1 then
  notify(ARGV[5], 'r', ARGV[3], ARGV[6])
end
return written
`;

/**
 * KEYS: value, lease, version. ARGV: envelope (any version in its header), px ms, channel, key
 * part, max broadcast length. A write-through: advances the version, writes the envelope under it,
 * revokes any lease (fencing running loads) and notifies. Returns the new version.
 */
export const SET_VALUE = `${BUMP}${NOTIFY}
local head, rest = string.match(ARGV[1], '^({"v":%d+,"n":)%d+()')
if not head then
  return redis.error_reply('ERR herd-guard: malformed envelope')
end
local version = bump(KEYS[3])
local envelope = head .. version .. string.sub(ARGV[1], rest)
redis.call('SET', KEYS[1], envelope, 'PX', ARGV[2])
redis.call('DEL', KEYS[2])
local body = ''
if string.len(envelope) <= tonumber(ARGV[5]) then
  body = envelope
end
notify(ARGV[3], 'w', version, ARGV[4], body)
return version
`;

/**
 * KEYS: value, lease, version. ARGV: mode ('stale' or 'delete'), channel, key part. Advances the
 * version (also for an absent key, so running loads are fenced), revokes any lease, then marks the
 * envelope stale (rewriting only its header: version and invalidated flag, keeping its TTL) or
 * deletes it, and notifies. Returns {existed, version}.
 */
export const INVALIDATE = `${BUMP}${NOTIFY}
local version = bump(KEYS[3])
redis.call('DEL', KEYS[2])
local existed = 0
if ARGV[1] == 'delete' then
  existed = redis.call('DEL', KEYS[1])
  notify(ARGV[2], 'd', version, ARGV[3])
else
  local current = redis.pcall('GET', KEYS[1])
  if type(current) == 'string' then
    local head, rest = string.match(current, '^({"v":%d+,"n":)%d+,"i":%d()')
    if head then
      redis.call('SET', KEYS[1], head .. version .. ',"i":1' .. string.sub(current, rest), 'KEEPTTL')
      existed = 1
    end
  end
  notify(ARGV[2], 's', version, ARGV[3])
end
return {existed, version}
`;

/** KEYS: lease. ARGV: token, channel, key part, fence. Deletes the lease only if the token still owns it. */
export const RELEASE_LEASE = `${NOTIFY}
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  notify(ARGV[2], 'r', ARGV[4], ARGV[3])
  return 1
end
return 0
`;

/** KEYS: lease. ARGV: token, ttl ms. Extends the lease only if the token still owns it. */
export const EXTEND_LEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`;

/** Redis's own clock in milliseconds: index deadlines never depend on a pod's clock. */
const NOW_MS = `
local function nowMs()
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end
`;

/**
 * KEYS: index (a sorted set). ARGV: member key, ttl (ms). Records the member until the later of
 * its deadlines (on Redis's clock), drops members past theirs, and keeps the set alive as long as
 * its longest member.
 */
export const ADD_TO_INDEX = `${NOW_MS}
local now = nowMs()
redis.call('ZADD', KEYS[1], 'GT', string.format('%.0f', now + tonumber(ARGV[2])), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if last[2] then
  redis.call('PEXPIREAT', KEYS[1], last[2])
end
return 1
`;

/** KEYS: index. The members whose deadline (on Redis's clock) has not passed. */
export const INDEX_MEMBERS = `${NOW_MS}
return redis.call('ZRANGEBYSCORE', KEYS[1], nowMs(), '+inf')
`;
