--[[
  Locks a seat in a team for the caller until now + lockSeconds, and journals what changed.
  A user holds at most one live lock per activity: a live lock in another team of the
  activity is moved here in the same step. Expired locks of the teams involved are dropped
  first, so a refusal is never caused by a stale lock.

  KEYS[1] {tm:<activity>}:team:<team>:meta     hash: leaderId, capacity, lockSeconds, deadlineMs, status, version, ...
  KEYS[2] {tm:<activity>}:team:<team>:members  hash: userId -> "<seat>:<joinedAtMs>"
  KEYS[3] {tm:<activity>}:team:<team>:locks    zset: userId -> expiresAtMs
  KEYS[4] {tm:<activity>}:holders              hash: userId -> teamId of the user's lock
  KEYS[5] {tm:<activity>}:expiries             zset: "<teamId>:<userId>" -> expiresAtMs
  KEYS[6] {tm:<activity>}:journal              stream of changes waiting for PostgreSQL
  KEYS[7] meta of the team ARGV[4] names (KEYS[1] when ARGV[4] is '')
  KEYS[8] locks of that team (KEYS[3] when ARGV[4] is '')
  ARGV[1] user id
  ARGV[2] team id
  ARGV[3] event id, minted by the caller
  ARGV[4] the team the caller expects KEYS[4] to name for the user, or ''

  Every reply but 'missing' and 'holderIs' is {tag, entryId, entryFields, ...}: the expired
  locks it dropped are journaled whatever it answers; entryId is '' when nothing changed.
    {'missing'}                                meta missing: rebuild from PostgreSQL, then retry
    {'holderIs', holderTeamId}                 KEYS[4] names another team than ARGV[4]: retry with that one
    {'locked', entryId, fields, expiresAtMs, releasedTeamId}  releasedTeamId is '' unless a live lock moved
    {'alreadyLocked', entryId, fields, expiresAtMs}  the caller already holds a live lock on this team
    {'member', entryId, fields}                the caller is a member
    {'closed', entryId, fields, status}        the team is closed (COMPLETE, FAILED, or past its deadline)
    {'full', entryId, fields, nextUnlockAtMs, nowMs}  no free seat: members + live locks = capacity;
                                               nextUnlockAtMs is nil when no lock is live
]]
-- @include "now.lua"
-- @include "teamSeats.lua"

local meta, members, locks, holders, expiries, stream, previous_meta, previous_locks =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local user, team_id, event_id, expected_holder = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

if redis.call('EXISTS', meta) == 0 then
  return {'missing'}
end
local holder = redis.call('HGET', holders, user) or ''
if holder ~= expected_holder then
  return {'holderIs', holder}
end

local now = now_ms()
local events = {}
local metas = {[team_id] = meta}
drop_expired_locks(locks, holders, expiries, team_id, now, events)

-- The caller's lock elsewhere: still live, it moves here if a seat is free; run out, it goes now.
local previous = nil
if holder ~= '' and holder ~= team_id then
  metas[holder] = previous_meta
  local expires = redis.call('ZSCORE', previous_locks, user)
  if expires and tonumber(expires) > now then
    previous = holder
  else
    if expires then
      redis.call('ZREM', previous_locks, user)
      add_event(events, 'EXPIRED', holder, user, tonumber(expires))
    end
    forget_lock(holders, expiries, holder, user)
  end
end

local function reply(tag, ...)
  local entry_id, fields = journal_changes(stream, metas, 'lock', team_id, event_id, now, events)
  return {tag, entry_id, fields, ...}
end

local own = redis.call('ZSCORE', locks, user)
if own then
  return reply('alreadyLocked', tonumber(own))
end
if holder == team_id then
  -- The index named this team, but the lock is gone (the team was rebuilt).
  forget_lock(holders, expiries, team_id, user)
end
if redis.call('HEXISTS', members, user) == 1 then
  return reply('member')
end
if is_closed(meta, now) then
  return reply('closed', redis.call('HGET', meta, 'status'))
end
if redis.call('HLEN', members) + redis.call('ZCARD', locks) >= tonumber(redis.call('HGET', meta, 'capacity')) then
  return reply('full', next_unlock_at(locks), now)
end

local expires_at = now + tonumber(redis.call('HGET', meta, 'lockSeconds')) * 1000
if previous then
  redis.call('ZREM', previous_locks, user)
  redis.call('ZREM', expiries, previous .. ':' .. user)
  add_event(events, 'MOVED', previous, user, now)
end
redis.call('ZADD', locks, expires_at, user)
redis.call('HSET', holders, user, team_id)
redis.call('ZADD', expiries, expires_at, team_id .. ':' .. user)
add_event(events, 'LOCKED', team_id, user, now, expires_at)
return reply('locked', expires_at, previous or '')
