--[[
  Turns a paid seat into membership, and journals it. Two modes (ARGV[5]):
  - 'payment', the provider's notify: only the user's live lock whose minted reference is
    ARGV[3] (KEYS[8]) becomes the seat. A payment for a lock that ran out, moved or was
    released, or for a team that is closed, seats no one: 'late', and a refund is owed.
  - 'operator', a manual confirmation: the user's live lock becomes the seat; without one,
    a free seat is taken directly.
  The member who fills the team completes it, and the locks still held are released. The
  user's count of teams joined (KEYS[10]) grows by one. Idempotent per payment reference:
  a repeat answers as the first call did.

  KEYS[1] {tm:<activity>}:team:<team>:meta      hash: capacity, deadlineMs, status, version, ...
  KEYS[2] {tm:<activity>}:team:<team>:members   hash: userId -> "<seat>:<joinedAtMs>"
  KEYS[3] {tm:<activity>}:team:<team>:payments  hash: paymentRef -> userId
  KEYS[4] {tm:<activity>}:team:<team>:locks     zset: userId -> expiresAtMs
  KEYS[5] {tm:<activity>}:holders               hash: userId -> teamId
  KEYS[6] {tm:<activity>}:expiries              zset: "<teamId>:<userId>" -> expiresAtMs
  KEYS[7] {tm:<activity>}:journal               stream
  KEYS[8] {tm:<activity>}:team:<team>:lockRefs  hash: userId -> paymentRef of the user's latest lock here
  KEYS[9] {tm:<activity>}:activity              hash: the activity's terms (must exist, see lockTeamSeat.lua)
  KEYS[10] {tm:<activity>}:joined               hash: userId -> teams joined as a buyer
  KEYS[11] {tm:<activity>}:team:<team>:lateRefs  set: payment references that came too late to seat anyone
  ARGV[1] user id
  ARGV[2] team id
  ARGV[3] payment reference
  ARGV[4] event id, minted by the caller
  ARGV[5] 'payment' or 'operator'
  ARGV[6] the provider's transaction id ('' for an operator), journaled with the member

  A refusal still journals the expired locks it dropped; entryId is '' when nothing changed.
    {'missing'}                                   meta or KEYS[9] missing: rebuild from PostgreSQL, then retry
    {'joined', entryId, fields, completed}        completed = 1 when this seat filled the team
    {'alreadyMember'}                             this payment reference or an earlier one seated the caller
    {'paymentRefTaken'}                           the payment reference confirmed another user's seat
    {'paymentRefunded'}                           'operator' mode: the reference came too late and is owed back
    {'noSeatLock', entryId, fields, nextUnlockAtMs}  no live lock and no free seat (nextUnlockAtMs nil: no lock)
    {'closed', entryId, fields, status}           the team is closed
    {'late', entryId, fields}                     'payment' mode: the payment's lock is not live (or the
                                                  user is a member through another payment)
    {'teamFailed'}                                'payment' mode: the payment of a seat an operator
                                                  confirmed came after the team FAILED, whose refunds
                                                  were owed without it
]]
-- @include "now.lua"
-- @include "teamSeats.lua"

local meta, members, payments, locks, holders, expiries, stream = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local lock_refs, activity, joined, late_refs = KEYS[8], KEYS[9], KEYS[10], KEYS[11]
local user, team_id, payment_ref, event_id, mode, provider_txn = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]

if redis.call('EXISTS', meta) == 0 or redis.call('EXISTS', activity) == 0 then
  return {'missing'}
end
local paid_by = redis.call('HGET', payments, payment_ref)
if paid_by and paid_by ~= user then
  return {'paymentRefTaken'}
end
-- Redis orders this against failTeam.lua: a payment that came first is refunded with the
-- team's statement, one that comes after is refunded by its notify (the same source key).
if paid_by and mode == 'payment' and redis.call('HGET', meta, 'status') == 'FAILED' then
  return {'teamFailed'}
end
if paid_by or (mode == 'operator' and redis.call('HEXISTS', members, user) == 1) then
  return {'alreadyMember'}
end
-- Decided here, in the order Redis runs the two: an operator's seat cannot take a payment
-- a notify just found too late, whose refund may not be committed yet.
if mode == 'operator' and redis.call('SISMEMBER', late_refs, payment_ref) == 1 then
  return {'paymentRefunded'}
end

local now = now_ms()
local events = {}
local metas = {[team_id] = meta}
drop_expired_locks(locks, holders, expiries, team_id, now, events)

-- A payment that seats no one: owed back by the caller, and no operator's seat may use it.
local function too_late()
  redis.call('SADD', late_refs, payment_ref)
  expire_with_team(meta, late_refs)
end
if mode == 'payment' and (redis.call('HGET', lock_refs, user) ~= payment_ref or not redis.call('ZSCORE', locks, user)) then
  too_late()
  local entry_id, fields = journal_changes(stream, metas, 'confirm', team_id, event_id, now, events)
  return {'late', entry_id, fields}
end
if is_closed(meta, now) then
  if mode == 'payment' then
    too_late()
  end
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
-- The first paid seat creates the hash: it goes when the team goes.
expire_with_team(meta, payments)
redis.call('HINCRBY', joined, user, 1)
-- The counts go with the terms they are checked against.
local activity_ttl = redis.call('PTTL', activity)
if activity_ttl > 0 then
  redis.call('PEXPIRE', joined, activity_ttl)
end
add_event(events, 'CONFIRMED', team_id, user, now, lock_expires and tonumber(lock_expires) or nil)
local completed = 0
if redis.call('HLEN', members) >= capacity then
  completed = 1
  redis.call('HSET', meta, 'status', 'COMPLETE', 'closedAtMs', now)
  release_all_locks(locks, holders, expiries, team_id, now, events)
end
local entry_id, fields = journal_changes(stream, metas, 'confirm', team_id, event_id, now, events,
  {'user', user, 'paymentRef', payment_ref, 'seat', tostring(seat), 'providerTxnId', provider_txn})
return {'joined', entry_id, fields, completed}
