--[[
  Turns the caller's paid seat into membership, and journals it. The caller's live lock
  becomes the seat; without one, a free seat is taken directly (a payment that arrives
  after its lock ran out is honoured while a seat is free). The member who fills the
  team completes it, and the locks still held are released. Idempotent per payment
  reference: a repeat answers as the first call did.

  KEYS[1] {tm:<activity>}:team:<team>:meta      hash: capacity, deadlineMs, status, version, ...
  KEYS[2] {tm:<activity>}:team:<team>:members   hash: userId -> "<seat>:<joinedAtMs>"
  KEYS[3] {tm:<activity>}:team:<team>:payments  hash: paymentRef -> userId
  KEYS[4] {tm:<activity>}:team:<team>:locks     zset: userId -> expiresAtMs
  KEYS[5] {tm:<activity>}:holders               hash: userId -> teamId
  KEYS[6] {tm:<activity>}:expiries              zset: "<teamId>:<userId>" -> expiresAtMs
  KEYS[7] {tm:<activity>}:journal               stream
  ARGV[1] user id
  ARGV[2] team id
  ARGV[3] payment reference
  ARGV[4] event id, minted by the caller

  A refusal still journals the expired locks it dropped; entryId is '' when nothing changed.
    {'missing'}                                   meta missing: rebuild from PostgreSQL, then retry
    {'joined', entryId, fields, completed}        completed = 1 when this seat filled the team
    {'alreadyMember'}                             this payment reference or an earlier one seated the caller
    {'paymentRefTaken'}                           the payment reference confirmed another user's seat
    {'noSeatLock', entryId, fields, nextUnlockAtMs}  no live lock and no free seat (nextUnlockAtMs nil: no lock)
    {'closed', entryId, fields, status}           the team is closed
]]
-- @include "now.lua"
-- @include "teamSeats.lua"

local meta, members, payments, locks, holders, expiries, stream = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local user, team_id, payment_ref, event_id = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

if redis.call('EXISTS', meta) == 0 then
  return {'missing'}
end
local paid_by = redis.call('HGET', payments, payment_ref)
if paid_by and paid_by ~= user then
  return {'paymentRefTaken'}
end
if paid_by or redis.call('HEXISTS', members, user) == 1 then
  return {'alreadyMember'}
end

local now = now_ms()
local events = {}
local metas = {[team_id] = meta}
drop_expired_locks(locks, holders, expiries, team_id, now, events)

if is_closed(meta, now) then
  local entry_id, fields = journal_changes(stream, metas, 'confirm', team_id, event_id, now, events)
  return {'closed', entry_id, fields, redis.call('HGET', meta, 'status')}
end

local capacity = tonumber(redis.call('HGET', meta, 'capacity'))
local lock_expires = redis.call('ZSCORE', locks, user)
if lock_expires then
  redis.call('ZREM', locks, user)
  forget_lock(holders, expiries, team_id, user)
elseif redis.call('HLEN', members) + redis.call('ZCARD', locks) >= capacity then
  local entry_id, fields = journal_changes(stream, metas, 'confirm', team_id, event_id, now, events)
  return {'noSeatLock', entry_id, fields, next_unlock_at(locks)}
end

local seat = redis.call('HLEN', members) + 1
redis.call('HSET', members, user, seat .. ':' .. now)
redis.call('HSET', payments, payment_ref, user)
add_event(events, 'CONFIRMED', team_id, user, now, lock_expires and tonumber(lock_expires) or nil)
local completed = 0
if redis.call('HLEN', members) >= capacity then
  completed = 1
  redis.call('HSET', meta, 'status', 'COMPLETE', 'closedAtMs', now)
  release_all_locks(locks, holders, expiries, team_id, now, events)
end
local entry_id, fields = journal_changes(stream, metas, 'confirm', team_id, event_id, now, events,
  {'user', user, 'paymentRef', payment_ref, 'seat', tostring(seat)})
return {'joined', entry_id, fields, completed}
