--[[
  An operator's change to a running activity: replaces the settings JSON whole and adds
  stock top-ups, in one step, so the next draw sees every new setting and no draw sees
  half of them. Optimistic: applies only over the version the caller read. A change made
  under a requestId is recorded with it, so a retry answers that change rather than
  applying it again (addStock is a delta).

  KEYS[1] {lot:<id>}:meta      hash: settings (JSON), version
  KEYS[2] {lot:<id>}:stock     hash: prizeId -> units left
  KEYS[3] {lot:<id>}:journal   stream
  KEYS[4] {lot:<id>}:daily     the activity's other keys, whose retention follows the end time
  KEYS[5] {lot:<id>}:requests
  KEYS[6] {lot:<id>}:releases
  KEYS[7] {lot:<id>}:hours
  KEYS[8] {lot:<id>}:changes   hash: "<changedBy>\n<requestId>" -> "<version>|<digest>", the changes made under a requestId
  ARGV[1] activity id
  ARGV[2] the version the new settings replace
  ARGV[3] the new settings (JSON, with version = ARGV[2] + 1); a new endsAtMs already past
          in Redis time is replaced by the next millisecond
  ARGV[4] who made the change
  ARGV[5] the app clock's offset from Redis time, in ms (0 but under a test clock)
  ARGV[6] the change's requestId ('' for none)
  ARGV[7] the digest of the change's input ('' for none)
  ARGV[8..] pairs: prizeId, units to add to its stock

  Returns
    {'missing'}                           meta missing: rebuild, then retry
    {'repeated', '<version>|<digest>'}    the operator's requestId made a change already; nothing changed
    {'applied', entryId, entryFields}
    {'stale'}                             the settings changed since ARGV[2]: read them again
    {'ended'}                             the change moves the end of an activity that has ended
]]
-- @include "now.lua"

if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'missing'}
end
-- Before the version: a retry racing its first call, which made the version it read stale, finds the change here.
local request = ARGV[4] .. '\n' .. ARGV[6]
if ARGV[6] ~= '' then
  local first = redis.call('HGET', KEYS[8], request)
  if first then
    return {'repeated', first}
  end
end
if redis.call('HGET', KEYS[1], 'version') ~= ARGV[2] then
  return {'stale'}
end
local settings_json = ARGV[3]
local settings = cjson.decode(settings_json)
-- The caller checked this against its own read of the clock; an update landing at the end
-- instant is decided here, in Redis time, as draws are.
local current = cjson.decode(redis.call('HGET', KEYS[1], 'settings'))
local now = now_ms() + tonumber(ARGV[5])
if settings.endsAtMs ~= current.endsAtMs and current.endsAtMs <= now then
  return {'ended'}
end
-- An end moved into the past ends the activity at the next millisecond of this clock, so
-- every draw already made (dated now at the latest) is dated before it. The JSON is edited,
-- not re-encoded: cjson would turn its empty arrays into objects. retainUntilMs and the
-- offset table, from the caller's earlier clamp, stay a few ms short: harmless.
if settings.endsAtMs ~= current.endsAtMs and settings.endsAtMs <= now then
  local edited, replaced = string.gsub(settings_json, '"endsAtMs":%d+', '"endsAtMs":' .. string.format('%d', now + 1), 1)
  if replaced ~= 1 then
    return redis.error_reply('updateLotterySettings: no endsAtMs in the settings JSON')
  end
  settings_json = edited
end

redis.call('HSET', KEYS[1], 'settings', settings_json, 'version', settings.version)
if ARGV[6] ~= '' then
  redis.call('HSET', KEYS[8], request, string.format('%d', settings.version) .. '|' .. ARGV[7])
end
for i = 8, #ARGV, 2 do
  redis.call('HINCRBY', KEYS[2], ARGV[i], tonumber(ARGV[i + 1]))
end
for i = 1, #KEYS do
  if i ~= 3 then redis.call('PEXPIREAT', KEYS[i], settings.retainUntilMs) end
end

local fields = {
  'kind', 'lottery.settings', 'activity', ARGV[1], 'version', tostring(settings.version),
  'settings', settings_json, 'by', ARGV[4], 'at', tostring(now_ms()), 'request', ARGV[6], 'digest', ARGV[7],
}
local entryId = redis.call('XADD', KEYS[3], '*', unpack(fields))
return {'applied', entryId, fields}
