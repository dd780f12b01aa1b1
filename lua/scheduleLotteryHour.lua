--[[
  TIMED: schedules one hour of releases, once. For each scheduled prize it takes
  min(the hour's quota, units left) from stock now and places them at random instants
  of the hour (clipped to the activity's window) in the releases sorted set. The hour
  is marked in the same step, so however many instances try, an hour is scheduled once.
  While the activity is paused an hour releases nothing and its quota stays in stock: a
  resume must not hand out every hour of the pause at once.

  KEYS[1] {lot:<id>}:meta      hash: settings (JSON), version
  KEYS[2] {lot:<id>}:stock     hash: prizeId -> units not yet scheduled
  KEYS[3] {lot:<id>}:releases  zset: "<prizeId>:<stockUnit>" scored by release time
  KEYS[4] {lot:<id>}:hours     set of scheduled hour starts (ms)
  KEYS[5] {lot:<id>}:journal   stream
  ARGV[1] activity id
  ARGV[2] schedule id, minted by the caller
  ARGV[3] hour start, UTC ms
  ARGV[4] local hour of day, 0..23: the index into hourlyQuota
  ARGV[5] the settings version the caller read the quotas from
  ARGV[6] the range of the random numbers below (2^30)
  ARGV[7..] random integers in [0, ARGV[6]) from Node's crypto: for each scheduled prize in
          settings order, as many as its quota for this hour

  Returns
    {'missing'}                                 meta missing: rebuild, then retry
    {'scheduled', released, entryId, entryFields}
    {'already'}                                 this hour was scheduled before
    {'stale'}                                   the settings changed since ARGV[5]: read them again
]]
-- @include "now.lua"

local HOUR_MS = 3600000

if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'missing'}
end
local settings = cjson.decode(redis.call('HGET', KEYS[1], 'settings'))
if settings.version ~= tonumber(ARGV[5]) then
  return {'stale'}
end
local hourStart = tonumber(ARGV[3])
if redis.call('SISMEMBER', KEYS[4], ARGV[3]) == 1 then
  return {'already'}
end

local from = math.max(hourStart, settings.startsAtMs)
local span = math.min(hourStart + HOUR_MS, settings.endsAtMs) - from
local range = tonumber(ARGV[6])
local hour = tonumber(ARGV[4]) + 1
local nextRandom = 7
local released = {}
for _, prize in ipairs(settings.prizes) do
  if #prize.hourlyQuota == 24 then
    local quota = prize.hourlyQuota[hour]
    local left = tonumber(redis.call('HGET', KEYS[2], prize.id) or '0')
    local count = math.min(quota, left)
    if span <= 0 or settings.paused then count = 0 end
    for i = 0, count - 1 do
      -- span < 2^22 and the random number < 2^30: the product is exact.
      local at = from + math.floor(tonumber(ARGV[nextRandom + i]) * span / range)
      local unit = prize.totalStock - left + i + 1
      redis.call('ZADD', KEYS[3], at, prize.id .. ':' .. unit)
      released[#released + 1] = prize.id .. ':' .. unit .. ':' .. at
    end
    if count > 0 then
      redis.call('HINCRBY', KEYS[2], prize.id, -count)
    end
    nextRandom = nextRandom + quota
  end
end

redis.call('SADD', KEYS[4], ARGV[3])
redis.call('PEXPIREAT', KEYS[4], settings.retainUntilMs)
if #released > 0 then
  redis.call('PEXPIREAT', KEYS[3], settings.retainUntilMs)
end

local fields = {
  'kind', 'lottery.schedule', 'activity', ARGV[1], 'schedule', ARGV[2], 'hour', ARGV[3],
  'localHour', ARGV[4], 'releases', table.concat(released, ','), 'at', tostring(now_ms()),
}
local entryId = redis.call('XADD', KEYS[5], '*', unpack(fields))
return {'scheduled', #released, entryId, fields}
