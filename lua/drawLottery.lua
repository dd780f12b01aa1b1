--[[
  One lottery draw, WEIGHTED or TIMED: checks the window and the user's daily draw
  limit, chooses, takes the stock, counts, and journals the draw (won or lost).

  KEYS[1] {lot:<id>}:meta      hash: settings (JSON, src/domain/lottery/settings.ts), version
  KEYS[2] {lot:<id>}:stock     hash: prizeId -> units left (TIMED scheduled prizes: units not yet scheduled)
  KEYS[3] {lot:<id>}:daily     hash: day -> the local day counted; d:<user> draws, w:<user> wins that
                               count toward the win limit, s:<prizeId> wins of the prize, that day
  KEYS[4] {lot:<id>}:requests  hash: <user> "\n" <requestId> -> "<drawId>|<prizeId or ''>|<drawnAtMs>|<version>"
  KEYS[5] {lot:<id>}:releases  zset (TIMED): "<prizeId>:<stockUnit>" scored by release time
  KEYS[6] {lot:<id>}:journal   stream of draws waiting for PostgreSQL
  ARGV[1] user id
  ARGV[2] draw id, minted by the caller
  ARGV[3] request id, or '' for none
  ARGV[4] u: a uniform random integer in [0, ARGV[5]) from Node's crypto, in decimal
  ARGV[5] the range of u (2^48 - 1)
  ARGV[6] clock offset in ms added to Redis TIME; always 0 unless the server runs with TEST_CLOCK
  ARGV[7] activity id
  ARGV[8] the points the caller reserved for this draw (draw id): 0 for a free draw

  Returns
    {'missing'}                                             meta missing: rebuild, then retry
    {'drawn', drawId, drawnAtMs, prizeJson or '', version, entryId, entryFields}
                                                            drawn (won or lost); prizeJson is the prize won
    {'repeated', drawId, drawnAtMs, prizeJson or '', version}
                                                            this requestId was drawn before (the prize
                                                            as it is now, the version it was drawn with)
    {'inactive', reason, startsAtMs, endsAtMs, nowMs, availableAtMs}
                                                            not active: ENDED, PAUSED, NOT_STARTED; SOLD_OUT
                                                            (a paid WEIGHTED draw with no prize left to win, or TIMED:
                                                            nothing left to release and no consolation left);
                                                            SOLD_OUT_TODAY (a paid WEIGHTED draw, the daily stocks
                                                            gone); NOTHING_RELEASED (TIMED: no consolation left,
                                                            prizes still to come). availableAtMs: when it may change
                                                            (the next day, the next release), 0 if unknown; a release's
                                                            instant is secret: users are told only when its hour ends
    {'limit', dailyDrawLimit, resetsAtMs}                   the user's draws today reached the limit
    {'winLimit', dailyWinLimit, resetsAtMs}                 a paid draw at the user's daily win limit, which could
                                                            only lose
    {'reroll'}                                              call again with a new u; nothing changed
    {'unpaid', drawCostPoints}                              ARGV[8] is not the draw's cost; nothing changed

  Why the WEIGHTED choice is exact. T, the sum of the available prizes' weights plus
  noPrizeWeight (plus, with soldOutOdds NO_PRIZE, the weights of the prizes sold out, which
  lose as noPrizeWeight does), is at most 21 * 10^6 (input limits), and u < 2^48: every
  number here is an integer below 2^53, so doubles hold it exactly and math.fmod is exact. Of the
  R = ARGV[5] values of u, the first A = R - (R mod T) are accepted and r = u mod T;
  each r in [0, T) then comes from exactly A / T values of u, so P(r) = 1/T, and a
  prize whose weight w covers w consecutive values of r (cumulative sums over the
  available prizes in order) is won with probability w / T exactly: no modulo bias.
  Values u >= A (a chance below T / R < 2^-23) are rejected before anything is written.
  Lua's math.random is never used.
]]
-- @include "now.lua"

local DAY_MS = 86400000

if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'missing'}
end

local settings = cjson.decode(redis.call('HGET', KEYS[1], 'settings'))
local user, drawId, requestId = ARGV[1], ARGV[2], ARGV[3]
local requestField = user .. '\n' .. requestId

local function prize_json(prize)
  return cjson.encode({
    id = prize.id, title = prize.title, kind = prize.kind, points = prize.points,
    weight = prize.weight, totalStock = prize.totalStock, dailyStock = prize.dailyStock,
  })
end

local function find_prize(prizeId)
  for _, prize in ipairs(settings.prizes) do
    if prize.id == prizeId then return prize end
  end
end

if requestId ~= '' then
  local previous = redis.call('HGET', KEYS[4], requestField)
  if previous then
    local previousDraw, prizeId, at, version = string.match(previous, '^([^|]*)|([^|]*)|(%d+)|(%d+)$')
    local prize = find_prize(prizeId)
    return {'repeated', previousDraw, tonumber(at), prize and prize_json(prize) or '', tonumber(version)}
  end
end

-- No draw without payment: a paid draw runs only on the reservation of its exact cost,
-- which PostgreSQL checks again when the draw is committed.
local cost = settings.drawCostPoints or 0
if tonumber(ARGV[8]) ~= cost then
  return {'unpaid', cost}
end

local now = now_ms() + tonumber(ARGV[6])
if now >= settings.endsAtMs then
  return {'inactive', 'ENDED', settings.startsAtMs, settings.endsAtMs, now, 0}
elseif settings.paused then
  return {'inactive', 'PAUSED', settings.startsAtMs, settings.endsAtMs, now, 0}
elseif now < settings.startsAtMs then
  return {'inactive', 'NOT_STARTED', settings.startsAtMs, settings.endsAtMs, now, 0}
end

-- Same rule as offsetAt in src/domain/lottery/timezone.ts.
local function utc_offset_ms(at)
  local minutes = settings.utcOffsets[1][2]
  for i = 2, #settings.utcOffsets do
    if settings.utcOffsets[i][1] <= at then minutes = settings.utcOffsets[i][2] else break end
  end
  return minutes * 60000
end

-- Same rule as nextLocalMidnight in src/domain/lottery/timezone.ts: when local day d + 1 begins.
local function next_day_start_ms(d)
  local nextDay = (d + 1) * DAY_MS
  local midnight = nextDay - utc_offset_ms(nextDay - utc_offset_ms(d * DAY_MS))
  if math.floor((midnight + utc_offset_ms(midnight)) / DAY_MS) > d then return midnight end
  -- Where DST begins at midnight (America/Santiago), 00:00 never comes: the day begins at the change.
  for i = 2, #settings.utcOffsets do
    if settings.utcOffsets[i][1] > midnight then return settings.utcOffsets[i][1] end
  end
  return midnight
end

-- The daily hash holds one day. A later day starts it afresh (when something is written);
-- a clock that steps back across midnight keeps counting in the newer day, and the draw is
-- dated at that day's start, so that its time falls in the day it counts in (local_day).
local day = math.floor((now + utc_offset_ms(now)) / DAY_MS)
local countedDay = tonumber(redis.call('HGET', KEYS[3], 'day'))
local newDay = countedDay == nil or day > countedDay
if not newDay and day < countedDay then
  day = countedDay
  now = next_day_start_ms(day - 1)
end

local function today(field)
  if newDay then return 0 end
  return tonumber(redis.call('HGET', KEYS[3], field) or '0')
end

local draws = today('d:' .. user)
if settings.dailyDrawLimit > 0 and draws >= settings.dailyDrawLimit then
  return {'limit', settings.dailyDrawLimit, next_day_start_ms(day)}
end
local atWinLimit = settings.dailyWinLimit > 0 and today('w:' .. user) >= settings.dailyWinLimit

local function stock_left(prize)
  return tonumber(redis.call('HGET', KEYS[2], prize.id) or '0')
end

local function winnable_by_design()
  for _, candidate in ipairs(settings.prizes) do
    if candidate.weight > 0 then return true end
  end
  return false
end

-- The choice. Nothing is written before it is made.
local prize, releaseMember, releaseAt
local total, roll, pool = '', '', {}
if settings.strategy == 'WEIGHTED' then
  local candidates, sum = {}, settings.noPrizeWeight
  if not atWinLimit then
    for i, candidate in ipairs(settings.prizes) do
      if candidate.weight > 0 and stock_left(candidate) > 0
          and (candidate.dailyStock == 0 or today('s:' .. candidate.id) < candidate.dailyStock) then
        candidates[#candidates + 1] = candidate
        pool[#pool + 1] = i - 1
        sum = sum + candidate.weight
      elseif settings.soldOutOdds == 'NO_PRIZE' then
        -- Out of stock, its weight stays as no prize's: the other prizes keep their chances.
        sum = sum + candidate.weight
      end
    end
  end
  if #candidates > 0 then
    local u, range = tonumber(ARGV[4]), tonumber(ARGV[5])
    if u >= range - math.fmod(range, sum) then
      return {'reroll'}
    end
    local r = math.fmod(u, sum)
    local cumulative = 0
    for _, candidate in ipairs(candidates) do
      cumulative = cumulative + candidate.weight
      if r < cumulative then
        prize = candidate
        break
      end
    end
    total, roll = sum, r
  elseif cost > 0 and winnable_by_design() then
    -- Nothing left to win (stock, daily stock or the win limit): a paid draw would be
    -- charged for a certain loss. An activity whose prizes all weigh 0 loses by design.
    if atWinLimit then
      return {'winLimit', settings.dailyWinLimit, next_day_start_ms(day)}
    end
    -- On the last day, prizes left for tomorrow are none left to win.
    local tomorrow = next_day_start_ms(day)
    if tomorrow < settings.endsAtMs then
      for _, candidate in ipairs(settings.prizes) do
        if candidate.weight > 0 and stock_left(candidate) > 0 then
          return {'inactive', 'SOLD_OUT_TODAY', settings.startsAtMs, settings.endsAtMs, now, tomorrow}
        end
      end
    end
    return {'inactive', 'SOLD_OUT', settings.startsAtMs, settings.endsAtMs, now, 0}
  end
else
  if not atWinLimit then
    local released = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now, 'WITHSCORES', 'LIMIT', 0, 1)
    if #released > 0 then
      releaseMember, releaseAt = released[1], released[2]
      prize = find_prize(string.match(releaseMember, '^(.*):%d+$'))
    end
  end
  if not prize then
    for _, candidate in ipairs(settings.prizes) do
      if candidate.kind == 'CONSOLATION' and #candidate.hourlyQuota == 0 then prize = candidate end
    end
    if not prize or stock_left(prize) <= 0 then
      -- Prizes still to come (released later, or not scheduled yet): not sold out for good.
      local nextRelease = redis.call('ZRANGE', KEYS[5], 0, 0, 'WITHSCORES')[2]
      local toSchedule = false
      for _, candidate in ipairs(settings.prizes) do
        if #candidate.hourlyQuota == 24 and stock_left(candidate) > 0 then toSchedule = true end
      end
      if nextRelease or toSchedule then
        return {'inactive', 'NOTHING_RELEASED', settings.startsAtMs, settings.endsAtMs, now, tonumber(nextRelease or '0')}
      end
      return {'inactive', 'SOLD_OUT', settings.startsAtMs, settings.endsAtMs, now, 0}
    end
  end
end

-- Count and allocate. Every counter value handed out is unique in PostgreSQL, so a
-- grant made twice (after Redis lost data) cannot be persisted twice.
if newDay then
  redis.call('UNLINK', KEYS[3])
  redis.call('HSET', KEYS[3], 'day', day)
  redis.call('PEXPIREAT', KEYS[3], settings.retainUntilMs)
end
local seq = redis.call('HINCRBY', KEYS[3], 'd:' .. user, 1)
local prizeId, unit, dailyUnit, winSeq, snapshot = '', '', '', '', ''
if prize then
  prizeId = prize.id
  if releaseMember then
    redis.call('ZREM', KEYS[5], releaseMember)
    unit = string.match(releaseMember, ':(%d+)$')
  else
    -- Units are numbered from 1 in the order they are won: total - left after taking one.
    unit = prize.totalStock - redis.call('HINCRBY', KEYS[2], prize.id, -1)
  end
  dailyUnit = redis.call('HINCRBY', KEYS[3], 's:' .. prize.id, 1)
  if settings.strategy == 'WEIGHTED' or releaseMember then
    winSeq = redis.call('HINCRBY', KEYS[3], 'w:' .. user, 1)
  end
  snapshot = prize_json(prize)
end

if requestId ~= '' then
  redis.call('HSET', KEYS[4], requestField, drawId .. '|' .. prizeId .. '|' .. now .. '|' .. settings.version)
  redis.call('PEXPIREAT', KEYS[4], settings.retainUntilMs)
end

local fields = {
  'kind', 'lottery.draw', 'draw', drawId, 'activity', ARGV[7], 'user', user, 'request', requestId,
  'day', tostring(day), 'seq', tostring(seq), 'prize', prizeId, 'unit', tostring(unit),
  'dailyUnit', tostring(dailyUnit), 'winSeq', tostring(winSeq), 'releaseAt', releaseAt or '',
  'u', total == '' and '' or ARGV[4], 'total', tostring(total), 'roll', tostring(roll),
  'pool', table.concat(pool, ','), 'version', tostring(settings.version), 'at', tostring(now),
  'snapshot', snapshot, 'cost', tostring(cost),
}
local entryId = redis.call('XADD', KEYS[6], '*', unpack(fields))
return {'drawn', drawId, now, snapshot, settings.version, entryId, fields}
