--[[
  Reserves a lottery draw's cost: takes it from the user's balance into a reservation
  keyed by the draw id, and journals it. The draw itself runs next, in the lottery's own
  slot (src/domain/points/drawPayments.ts explains the two steps). A requestId reserves
  once: a retry gets the draw id of its live reservation and takes nothing.

  KEYS[1] {shop}:balance:<user>                        the user's spendable points
  KEYS[2] {shop}:drawHold:<user>:<activity>:<request>  the draw id of the request's live reservation
  KEYS[3] {shop}:journal                               stream waiting for PostgreSQL
  ARGV[1] user id
  ARGV[2] activity id
  ARGV[3] request id, or '' for none
  ARGV[4] draw id, minted by the caller
  ARGV[5] the cost (> 0)
  ARGV[6] how long the request's reservation is remembered, in ms
  ARGV[7] after how long an undrawn reservation is released, in ms

  Returns
    {'missing'}                        the balance is missing: rebuild from PostgreSQL, then retry
    {'held', drawId}                   a retry: the request's reservation, nothing taken
    {'insufficient', balance, cost}    nothing taken
    {'reserved', entryId, entryFields}
]]
-- @include "now.lua"

if ARGV[3] ~= '' then
  local held = redis.call('GET', KEYS[2])
  if held then
    return {'held', held}
  end
end
local balance = redis.call('GET', KEYS[1])
if not balance then
  return {'missing'}
end
local cost = tonumber(ARGV[5])
if tonumber(balance) < cost then
  return {'insufficient', tonumber(balance), cost}
end
redis.call('DECRBY', KEYS[1], cost)
if ARGV[3] ~= '' then
  redis.call('SET', KEYS[2], ARGV[4], 'PX', ARGV[6])
end
local now = now_ms()
local fields = {
  'kind', 'points.reserveDraw', 'draw', ARGV[4], 'user', ARGV[1], 'activity', ARGV[2], 'request', ARGV[3],
  'cost', ARGV[5], 'at', tostring(now), 'releaseAfter', tostring(now + tonumber(ARGV[7])),
}
return {'reserved', redis.call('XADD', KEYS[3], '*', unpack(fields)), fields}
