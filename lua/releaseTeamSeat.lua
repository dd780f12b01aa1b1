--[[
  Gives the caller's seat lock on a team back at once, and journals it.

  KEYS[1] {tm:<activity>}:team:<team>:meta   hash: status, version, ...
  KEYS[2] {tm:<activity>}:team:<team>:locks  zset: userId -> expiresAtMs
  KEYS[3] {tm:<activity>}:holders            hash: userId -> teamId
  KEYS[4] {tm:<activity>}:expiries           zset: "<teamId>:<userId>" -> expiresAtMs
  KEYS[5] {tm:<activity>}:journal            stream
  ARGV[1] user id
  ARGV[2] team id
  ARGV[3] event id, minted by the caller

  Returns (entryId is '' when nothing changed, not even an expired lock dropped)
    {'missing'}                     meta missing: rebuild from PostgreSQL, then retry
    {'released', entryId, fields}   the caller's live lock is given back
    {'notHeld', entryId, fields}    the caller held no live lock on the team
]]
-- @include "now.lua"
-- @include "teamSeats.lua"

local meta, locks, holders, expiries, stream = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local user, team_id, event_id = ARGV[1], ARGV[2], ARGV[3]

if redis.call('EXISTS', meta) == 0 then
  return {'missing'}
end
local now = now_ms()
local events = {}
drop_expired_locks(locks, holders, expiries, team_id, now, events)

local tag = 'notHeld'
if redis.call('ZREM', locks, user) == 1 then
  tag = 'released'
  forget_lock(holders, expiries, team_id, user)
  add_event(events, 'RELEASED', team_id, user, now)
end
local entry_id, fields = journal_changes(stream, {[team_id] = meta}, 'release', team_id, event_id, now, events)
return {tag, entry_id, fields}
