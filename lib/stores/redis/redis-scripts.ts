/**
 * Lua scripts, registered once per client with ioredis `defineCommand` (EVALSHA, with the NOSCRIPT
 * fallback after a Redis restart handled by ioredis). Every key goes through KEYS.
 */

/** KEYS: lease, fence, value. ARGV: token, lease ttl ms. Returns {granted, fence, current envelope}. */
export const ACQUIRE_LEASE = `
local granted = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
local current = redis.pcall('GET', KEYS[3])
if type(current) == 'table' then
  -- Foreign data (not a string) at the value key: report it as unreadable.
  current = 'herd-guard:foreign'
end
if not granted then
  return {0, false, current}
end
local time = redis.call('TIME')
local micros = tonumber(time[1]) * 1000000 + tonumber(time[2])
local previous = tonumber(redis.call('GET', KEYS[2]) or '0')
-- Increases for every grant, and stays increasing even if the counter key expires (clock-based floor).
local fence = math.max(previous + 1, micros)
local encoded = string.format('%.0f', fence)
redis.call('SET', KEYS[2], encoded, 'PX', 604800000)
return {1, encoded, current}
`;

/**
 * KEYS: value, lease. ARGV: envelope, px ms, createdAt, token ('' for none), channel, message,
 * message carrying the envelope. Writes unless the stored envelope is newer, releases the lease if
 * still ours, notifies (with the envelope when it was written). Returns 1 if written.
 */
export const SET_AND_RELEASE = `
local current = redis.pcall('GET', KEYS[1])
local written = 1
if type(current) == 'string' then
  local created = string.match(current, '^{"v":%d+,"c":([%d%.eE%+%-]+),')
  if created and tonumber(created) > tonumber(ARGV[3]) then
    written = 0
  end
end
if written == 1 then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
if ARGV[4] ~= '' and redis.call('GET', KEYS[2]) == ARGV[4] then
  redis.call('DEL', KEYS[2])
end
if written == 1 then
  redis.call('PUBLISH', ARGV[5], ARGV[7])
else
  redis.call('PUBLISH', ARGV[5], ARGV[6])
end
return written
`;

/** KEYS: lease. ARGV: token, channel, message. Deletes the lease only if the token still owns it. */
export const RELEASE_LEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], ARGV[3])
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

/**
 * KEYS: value. ARGV: now ms, channel, message. Lowers the envelope's soft expiry to now and raises
 * its createdAt to now (a load started earlier may no longer overwrite it), keeping its TTL, and
 * notifies. Returns 1 when the key held an envelope. Rewrites only the header, so the value is never
 * re-encoded.
 */
export const MARK_STALE = `
local current = redis.pcall('GET', KEYS[1])
if type(current) ~= 'string' then
  return 0
end
local prefix, created, middle, soft = string.match(current, '^({"v":%d+,"c":)([^,]+)(,"s":)([^,]+),')
if not prefix then
  return 0
end
local now = tonumber(ARGV[1])
local newCreated = created
if tonumber(created) < now then
  newCreated = ARGV[1]
end
local newSoft = soft
if tonumber(soft) > now then
  newSoft = ARGV[1]
end
if newCreated ~= created or newSoft ~= soft then
  local rest = string.sub(current, string.len(prefix) + string.len(created) + string.len(middle) + string.len(soft) + 1)
  redis.call('SET', KEYS[1], prefix .. newCreated .. middle .. newSoft .. rest, 'KEEPTTL')
end
redis.call('PUBLISH', ARGV[2], ARGV[3])
return 1
`;

/**
 * KEYS: value, lease. ARGV: channel, message. Deletes the envelope and any lease on the key (a lease
 * held for a refresh backoff would otherwise block the reload), and notifies waiting followers.
 */
export const DELETE_KEY = `
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('PUBLISH', ARGV[1], ARGV[2])
return 1
`;

/**
 * KEYS: tag set. ARGV: member key, its hard expiry (ms), now (ms). Indexes the key under the tag,
 * drops members past their hard expiry, and keeps the set alive as long as its longest member.
 */
export const INDEX_TAG = `
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[3])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if last[2] then
  redis.call('PEXPIREAT', KEYS[1], last[2])
end
return 1
`;
