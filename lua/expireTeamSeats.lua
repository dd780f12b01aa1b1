--[[
  The expiry sweeper's step for one team: drops the locks that ran out (re-checked with
  Redis TIME, whatever the sweeper read), and journals them. Also drops index entries
  the sweeper found for locks the team no longer has.

  KEYS[1] {tm:<activity>}:team:<team>:meta   hash: version, ...
  KEYS[2] {tm:<activity>}:team:<team>:locks  zset: userId -> expiresAtMs
  KEYS[3] {tm:<activity>}:holders            hash: userId -> teamId
  KEYS[4] {tm:<activity>}:expiries           zset: "<teamId>:<userId>" -> expiresAtMs
  KEYS[5] {tm:<activity>}:journal            stream
  ARGV[1] team id
  ARGV[2] event id, minted by the caller
  ARGV[3..] users whose index entries for this team the sweeper found due

  Returns
    {'gone'}                           meta missing: the team's keys are gone, and so are its locks;
                                       the index entries were dropped, nothing else to do (no rebuild)
    {'expired', entryId, fields, count}  count = how many locks ran out; entryId '' when none did
]]
-- @include "now.lua"
-- @include "teamSeats.lua"

local meta, locks, holders, expiries, stream = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local team_id, event_id = ARGV[1], ARGV[2]

for i = 3, #ARGV do
  if not redis.call('ZSCORE', locks, ARGV[i]) then
    forget_lock(holders, expiries, team_id, ARGV[i])
  end
end
if redis.call('EXISTS', meta) == 0 then
  return {'gone'}
end
local now = now_ms()
local events = {}
drop_expired_locks(locks, holders, expiries, team_id, now, events)
local entry_id, fields = journal_changes(stream, {[team_id] = meta}, 'expire', team_id, event_id, now, events)
return {'expired', entry_id, fields, #events}
