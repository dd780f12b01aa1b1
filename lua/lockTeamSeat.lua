--[[
  Locks a seat in a team for the caller until now + lockSeconds, and journals what changed,
  with the payment the server minted for the lock (ARGV[5], bound to this user, team and
  lock: KEYS[9] keeps the live lock's reference, so only that payment can turn it into a
  seat). The payment is due a grace before its seat frees (the lock's expiry, or the team's
  deadline if sooner: a team still open then fails): a tenth of the lock, at most ARGV[7] ms.
  The seat is judged when the provider's notify arrives, seconds after the buyer paid, and
  a buyer who paid by the provider's deadline must still find the lock live then.
  The activity's limit on teams joined is checked here, against KEYS[11], so two
  locks racing cannot both pass it: a live lock counts as a join in progress, and a user
  holds one live lock per activity at most.
  A user holds at most one live lock per activity: a live lock in another team of the
  activity is moved here in the same step. A user takes at most ARGV[6] locks in one team
  (KEYS[12]), so releasing and locking again cannot hold a seat until the deadline.
  Expired locks of the teams involved are dropped first, so a refusal is never caused by a
  stale lock.

  KEYS[1] {tm:<activity>}:team:<team>:meta     hash: leaderId, capacity, lockSeconds, deadlineMs, status, version, ...
  KEYS[2] {tm:<activity>}:team:<team>:members  hash: userId -> "<seat>:<joinedAtMs>"
  KEYS[3] {tm:<activity>}:team:<team>:locks    zset: userId -> expiresAtMs
  KEYS[4] {tm:<activity>}:holders              hash: userId -> teamId of the user's lock
  KEYS[5] {tm:<activity>}:expiries             zset: "<teamId>:<userId>" -> expiresAtMs
  KEYS[6] {tm:<activity>}:journal              stream of changes waiting for PostgreSQL
  KEYS[7] meta of the team ARGV[4] names (KEYS[1] when ARGV[4] is '')
  KEYS[8] locks of that team (KEYS[3] when ARGV[4] is '')
  KEYS[9]  {tm:<activity>}:team:<team>:lockRefs hash: userId -> paymentRef of the user's latest lock here
  KEYS[10] {tm:<activity>}:activity             hash: groupPriceCents, maxTeamsPerUser (the activity's terms)
  KEYS[11] {tm:<activity>}:joined               hash: userId -> teams joined as a buyer, FAILED ones not counted
  KEYS[12] {tm:<activity>}:team:<team>:lockCounts hash: userId -> locks the user took in the team
  ARGV[1] user id
  ARGV[2] team id
  ARGV[3] event id, minted by the caller
  ARGV[4] the team the caller expects KEYS[4] to name for the user, or ''
  ARGV[5] the payment reference minted for this lock
  ARGV[6] the most locks a user may take in one team
  ARGV[7] the most grace (ms) between the payment's deadline and its seat freeing

  Every reply but 'missing' and 'holderIs' is {tag, entryId, entryFields, ...}: the expired
  locks it dropped are journaled whatever it answers; entryId is '' when nothing changed.
    {'missing'}                                meta or KEYS[10] missing: rebuild from PostgreSQL, then retry
    {'holderIs', holderTeamId}                 KEYS[4] names another team than ARGV[4]: retry with that one
    {'locked', entryId, fields, expiresAtMs, paymentDueAtMs, releasedTeamId, paymentRef, amountCents, team}
                                               expiresAtMs is the lock's, paymentDueAtMs the payment's;
                                               releasedTeamId is '' unless a live lock moved; fields
                                               carry payer, paymentRef, amountCents, expiresAt (the
                                               payment's); team is the team after the lock (team_state)
    {'alreadyLocked', entryId, fields, expiresAtMs, paymentDueAtMs, paymentRef, amountCents, team}
                                               the caller already holds a live lock here
    {'limitReached', entryId, fields, maxTeamsPerUser}  the caller joined as many teams as the activity allows
    {'lockLimitReached', entryId, fields, maxLocks}  the caller took as many locks in this team as allowed
    {'member', entryId, fields}                the caller is a member
    {'closed', entryId, fields, status}        the team is closed (COMPLETE, FAILED, or past its deadline)
    {'full', entryId, fields, nextUnlockAtMs, nowMs}  no free seat: members + live locks = capacity;
                                               nextUnlockAtMs is nil when no lock is live
]]
-- @include "now.lua"
-- @include "teamSeats.lua"

local meta, members, locks, holders, expiries, stream, previous_meta, previous_locks =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local lock_refs, activity, joined, lock_counts = KEYS[9], KEYS[10], KEYS[11], KEYS[12]
local user, team_id, event_id, expected_holder, payment_ref, max_locks = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], tonumber(ARGV[6])
local max_grace = tonumber(ARGV[7])

if redis.call('EXISTS', meta) == 0 or redis.call('EXISTS', activity) == 0 then
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

-- When the payment of a lock running out at lock_expires_at is due (see the top).
local function payment_due_at(lock_expires_at)
  local values = redis.call('HMGET', meta, 'lockSeconds', 'deadlineMs')
  local grace = math.min(tonumber(values[1]) * 100, max_grace)
  return math.min(lock_expires_at, tonumber(values[2])) - grace
end

local amount = redis.call('HGET', activity, 'groupPriceCents')
local own = redis.call('ZSCORE', locks, user)
if own then
  -- The state after reply() journaled (and bumped the version for) the expired locks it dropped.
  local answer = reply('alreadyLocked', tonumber(own), payment_due_at(tonumber(own)), redis.call('HGET', lock_refs, user) or '', amount)
  answer[#answer + 1] = team_state(meta, members, locks, now)
  return answer
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

local max_teams = tonumber(redis.call('HGET', activity, 'maxTeamsPerUser'))
if tonumber(redis.call('HGET', joined, user) or '0') >= max_teams then
  return reply('limitReached', max_teams)
end
if tonumber(redis.call('HGET', lock_counts, user) or '0') >= max_locks then
  return reply('lockLimitReached', max_locks)
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
redis.call('HSET', lock_refs, user, payment_ref)
redis.call('HINCRBY', lock_counts, user, 1)
-- Gone with the team's keys, the locks too (the first lock creates their set): a rebuilt
-- team has no locks, so no reference is needed then. The counts live as long (a rebuild
-- keeps them; Redis losing its data loses them, and the limit, which only has to outlast
-- abuse, starts again).
expire_with_team(meta, locks, lock_refs, lock_counts)
local payment_due = payment_due_at(expires_at)
local entry_id, fields = journal_changes(stream, metas, 'lock', team_id, event_id, now, events,
  {'payer', user, 'paymentRef', payment_ref, 'amountCents', amount, 'expiresAt', tostring(payment_due)})
return {'locked', entry_id, fields, expires_at, payment_due, previous or '', payment_ref, amount, team_state(meta, members, locks, now)}
