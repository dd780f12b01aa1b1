-- Shared by the team scripts. A seat lock lives under its activity's hash tag in three keys:
--   {tm:<activity>}:team:<team>:locks  zset userId -> expiresAtMs: the truth, what counts against capacity
--   {tm:<activity>}:holders            hash userId -> teamId: at most one live lock per user per activity
--   {tm:<activity>}:expiries           zset "<teamId>:<userId>" -> expiresAtMs: the expiry sweeper's index
-- The two activity keys are indexes; scripts trust only the team's locks zset and repair
-- index entries that point at a lock that is gone (a team rebuilt from PostgreSQL loses its locks).

local function forget_lock(holders, expiries, team_id, user)
  if redis.call('HGET', holders, user) == team_id then
    redis.call('HDEL', holders, user)
  end
  redis.call('ZREM', expiries, team_id .. ':' .. user)
end

local function add_event(events, kind, team_id, user, at, expires_at)
  events[#events + 1] = {kind = kind, team = team_id, user = user, at = at, expiresAt = expires_at}
end

-- Drops the team's locks that ran out at or before `now`, with an EXPIRED event at each one's expiry.
local function drop_expired_locks(locks, holders, expiries, team_id, now, events)
  local expired = redis.call('ZRANGEBYSCORE', locks, '-inf', now, 'WITHSCORES')
  for i = 1, #expired, 2 do
    forget_lock(holders, expiries, team_id, expired[i])
    add_event(events, 'EXPIRED', team_id, expired[i], tonumber(expired[i + 1]))
  end
  if #expired > 0 then
    redis.call('ZREMRANGEBYSCORE', locks, '-inf', now)
  end
end

-- Releases every lock the team still has (the team closed), with a RELEASED event each.
local function release_all_locks(locks, holders, expiries, team_id, now, events)
  for _, user in ipairs(redis.call('ZRANGE', locks, 0, -1)) do
    forget_lock(holders, expiries, team_id, user)
    add_event(events, 'RELEASED', team_id, user, now)
  end
  redis.call('DEL', locks)
end

-- The earliest expiry among the team's locks (call after drop_expired_locks), or false.
local function next_unlock_at(locks)
  local first = redis.call('ZRANGE', locks, 0, 0, 'WITHSCORES')
  if #first == 0 then
    return false
  end
  return tonumber(first[2])
end

-- Keys kept beside the team's (lock references, counts) expire with its meta hash.
local function expire_with_team(meta, ...)
  local meta_expires = redis.call('PTTL', meta)
  if meta_expires > 0 then
    for _, key in ipairs({...}) do
      redis.call('PEXPIRE', key, meta_expires)
    end
  end
end

local function is_closed(meta, now)
  return redis.call('HGET', meta, 'status') ~= 'OPEN' or now >= tonumber(redis.call('HGET', meta, 'deadlineMs'))
end

-- Every change to a team bumps its version. The floor at Redis time (ms x 1000) keeps it
-- growing across a rebuild from PostgreSQL, which restarts the counter at that floor.
-- Never creates a meta hash that is gone: that would look like a half-built team.
local function bump_version(meta, now)
  if redis.call('EXISTS', meta) == 0 then
    return
  end
  local version = redis.call('HINCRBY', meta, 'version', 1)
  if version < now * 1000 then
    redis.call('HSET', meta, 'version', string.format('%d', now * 1000))
  end
end

-- Bumps the version of every team an event names (metas: teamId -> meta key) and journals
-- the call as one entry. Returns entryId, fields; '' and {} when nothing changed.
local function journal_changes(stream, metas, op, team_id, event_id, now, events, extra)
  if #events == 0 and extra == nil then
    return '', {}
  end
  local bumped = {}
  for _, event in ipairs(events) do
    if not bumped[event.team] then
      bumped[event.team] = true
      bump_version(metas[event.team], now)
    end
  end
  if not bumped[team_id] then
    bump_version(metas[team_id], now)
  end
  local fields = {'kind', 'team.seats', 'op', op, 'event', event_id, 'team', team_id, 'at', tostring(now), 'events', cjson.encode(events)}
  for _, value in ipairs(extra or {}) do
    fields[#fields + 1] = value
  end
  return redis.call('XADD', stream, '*', unpack(fields)), fields
end

-- The team as readers see it (TeamStore's teamStateOf reads it): meta, members and locks
-- as HGETALL and ZRANGE WITHSCORES reply them, and the time, so a reply carries the state
-- and the caller needs no second read.
local function team_state(meta, members, locks, now)
  return {redis.call('HGETALL', meta), redis.call('HGETALL', members), redis.call('ZRANGE', locks, 0, -1, 'WITHSCORES'), now}
end
