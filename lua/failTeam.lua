--[[
  Closes a team that is still OPEN at its deadline: FAILED, its locks released, and its
  members (with their payment references) journaled to be refunded. A failed team no
  longer counts against its buyers' limit on teams joined (KEYS[9]). Checked against
  Redis TIME, so a worker with a fast clock cannot fail a team early. The deadline is the
  sooner of the team's here and PostgreSQL's (ARGV[3]): an operator's cancel brings
  PostgreSQL's forward to its own instant (GroupBuyActivities.cancel), and Redis's moves
  here, in the step that fails the team. Redis orders it against confirmTeamSeat.lua: a
  seat paid before is refunded with the team, a payment after seats no one and is late.

  KEYS[1] {tm:<activity>}:team:<team>:meta      hash: status, deadlineMs, version, ...
  KEYS[2] {tm:<activity>}:team:<team>:members   hash: userId -> "<seat>:<joinedAtMs>"
  KEYS[3] {tm:<activity>}:team:<team>:payments  hash: paymentRef -> userId
  KEYS[4] {tm:<activity>}:team:<team>:locks     zset: userId -> expiresAtMs
  KEYS[5] {tm:<activity>}:holders               hash: userId -> teamId
  KEYS[6] {tm:<activity>}:expiries              zset: "<teamId>:<userId>" -> expiresAtMs
  KEYS[7] {tm:<activity>}:journal               stream
  KEYS[8] {tm:<activity>}:activity              hash: the activity's terms (must exist, see lockTeamSeat.lua)
  KEYS[9] {tm:<activity>}:joined                hash: userId -> teams joined as a buyer
  ARGV[1] team id
  ARGV[2] event id, minted by the caller
  ARGV[3] the team's deadline in PostgreSQL (ms)

  Returns
    {'missing'}                   meta or KEYS[8] missing: rebuild from PostgreSQL, then retry
    {'failed', entryId, fields}   failed now; fields carry `members`, a JSON list of {user, paymentRef, seat, joinedAt}
    {'notOpen', status}           not OPEN: nothing to do
    {'notDue', deadlineMs}        the deadline has not passed yet
]]
-- @include "now.lua"
-- @include "teamSeats.lua"

local meta, members, payments, locks, holders, expiries, stream = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local activity, joined = KEYS[8], KEYS[9]
local team_id, event_id = ARGV[1], ARGV[2]

if redis.call('EXISTS', meta) == 0 or redis.call('EXISTS', activity) == 0 then
  return {'missing'}
end
local status = redis.call('HGET', meta, 'status')
if status ~= 'OPEN' then
  return {'notOpen', status}
end
local now = now_ms()
local deadline = math.min(tonumber(redis.call('HGET', meta, 'deadlineMs')), tonumber(ARGV[3]))
if now < deadline then
  return {'notDue', deadline}
end

local events = {}
drop_expired_locks(locks, holders, expiries, team_id, now, events)
release_all_locks(locks, holders, expiries, team_id, now, events)
redis.call('HSET', meta, 'status', 'FAILED', 'closedAtMs', now, 'deadlineMs', string.format('%d', deadline))

local payment_of = {}
local paid = redis.call('HGETALL', payments)
for i = 1, #paid, 2 do
  payment_of[paid[i + 1]] = paid[i]
end
local refunds = {}
local seated = redis.call('HGETALL', members)
for i = 1, #seated, 2 do
  local seat, joined_at = string.match(seated[i + 1], '^(%d+):(%d+)$')
  refunds[#refunds + 1] = {user = seated[i], paymentRef = payment_of[seated[i]], seat = tonumber(seat), joinedAt = tonumber(joined_at)}
end
local leader = redis.call('HGET', meta, 'leaderId')
for _, member in ipairs(refunds) do
  if member.user ~= leader and redis.call('HINCRBY', joined, member.user, -1) <= 0 then
    redis.call('HDEL', joined, member.user)
  end
end
local entry_id, fields = journal_changes(stream, {[team_id] = meta}, 'fail', team_id, event_id, now, events,
  {'members', cjson.encode(refunds)})
return {'failed', entry_id, fields}
