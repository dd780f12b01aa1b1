--[[
  Redeems one goods item for points: checks the stock, the per-user limit and the
  balance, then takes the points and one unit (a voucher code from the pool, or the
  next stock unit), and journals the redemption with the user's sequence number for
  the item. PostgreSQL keeps codes, stock units and sequence numbers unique, so a
  redemption Redis grants twice (after losing data) cannot be persisted twice. The
  answer, a refusal included, is remembered per (user, requestId) with the goods item it
  was for: a retry gets the first answer and never deducts twice, and the service
  refuses a requestId reused for another item. A refusal is journaled too, so PostgreSQL can
  give a retry the same problem after Redis has forgotten it.

  Every key shares the hash tag of the user's shop bucket, {shop} or {shop:<b>}
  (src/domain/points/buckets.ts): the user's balance and counts live there, with the
  bucket's share of the item's stock.
  KEYS[1] {shop}:balance:<user>          the user's spendable points
  KEYS[2] {shop}:goods:<goods>           hash: pointsCost, perUserLimit, pooled (1/0), stock (the bucket's
                                         allotment), remaining, onSale (0: off sale; absent: on sale),
                                         saleStartsAtMs and saleEndsAtMs (empty or absent: open-ended);
                                         without a pool the next stock unit of the bucket is stock - remaining
  KEYS[3] {shop}:goods:<goods>:codes     list of the pool's codes not handed out yet
  KEYS[4] {shop}:goods:<goods>:users     hash: user -> the user's last sequence number (kept when perUserLimit > 0)
  KEYS[5] {shop}:answer:<user>:<request> the remembered answer, '<goods id>|<answer>'
  KEYS[6] {shop}:journal                 stream of redemptions and refusals waiting for PostgreSQL
  ARGV[1] user id
  ARGV[2] goods id
  ARGV[3] request id
  ARGV[4] redemption id, minted by the caller
  ARGV[5] how long the answer is remembered, in ms
  ARGV[6] the bucket
  ARGV[7] '1': a dry bucket replies 'dry' (stock may move here from another bucket) instead of refusing

  Returns
    {'missing'}                          the balance or the goods item is missing: rebuild from PostgreSQL, then retry
    {'offSale', opensAtMs, endedAtMs}    an operator took the item off sale, or the time is outside its sale window:
                                         nothing changed, nothing remembered; opensAtMs is the start when only
                                         that is missing, endedAtMs the end when it has passed, each 0 otherwise
    {'dry'}                              (ARGV[7] = '1') the bucket has no stock: nothing changed, nothing remembered
    {'redeemed', entryId, entryFields}
    {'answered', remembered}             a retry: '<goods id>|' and the first answer, 'redeemed:<journal entry id>' or a refusal
    {'refused', answer, entryId, entryFields}
                                         'outOfStock', 'perUserLimit:<limit>' or 'insufficient:<balance>:<cost>'
]]
-- @include "now.lua"

local remembered = redis.call('GET', KEYS[5])
if remembered then
  return {'answered', remembered}
end
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('EXISTS', KEYS[2]) == 0 then
  return {'missing'}
end
-- One instant for the whole call: the entry's time is the one the sale window was checked at,
-- which PostgreSQL checks again.
local now = now_ms()

local function refuse(answer)
  redis.call('SET', KEYS[5], ARGV[2] .. '|' .. answer, 'PX', ARGV[5])
  local fields = {
    'kind', 'points.refuse', 'user', ARGV[1], 'goods', ARGV[2], 'request', ARGV[3], 'answer', answer, 'at', tostring(now),
  }
  return {'refused', answer, redis.call('XADD', KEYS[6], '*', unpack(fields)), fields}
end

local goods = redis.call('HMGET', KEYS[2], 'pointsCost', 'perUserLimit', 'pooled', 'stock', 'remaining', 'onSale', 'saleStartsAtMs', 'saleEndsAtMs')
-- A sale over is said so, paused or not: it does not come back by itself.
local starts, ends = tonumber(goods[7]), tonumber(goods[8])
if ends and now >= ends then
  return {'offSale', 0, ends}
end
if goods[6] == '0' then
  return {'offSale', 0, 0}
end
if starts and now < starts then
  return {'offSale', starts, 0}
end
local cost, limit, stock, remaining = tonumber(goods[1]), tonumber(goods[2]), tonumber(goods[4]), tonumber(goods[5])
if remaining <= 0 then
  if ARGV[7] == '1' then
    return {'dry'}
  end
  return refuse('outOfStock')
end
local seq = 0
if limit > 0 then
  seq = (tonumber(redis.call('HGET', KEYS[4], ARGV[1])) or 0) + 1
  if seq > limit then
    return refuse('perUserLimit:' .. limit)
  end
end
local balance = tonumber(redis.call('GET', KEYS[1]))
if balance < cost then
  return refuse('insufficient:' .. balance .. ':' .. cost)
end

local code, unit = '', ''
if goods[3] == '1' then
  code = redis.call('LPOP', KEYS[3])
  -- remaining and the pool's length move together; an empty pool is out of stock whatever remaining says.
  if not code then
    return refuse('outOfStock')
  end
else
  unit = tostring(stock - remaining)
end
redis.call('DECRBY', KEYS[1], cost)
redis.call('HINCRBY', KEYS[2], 'remaining', -1)
if seq > 0 then
  redis.call('HSET', KEYS[4], ARGV[1], seq)
end

local fields = {
  'kind', 'points.redeem', 'id', ARGV[4], 'user', ARGV[1], 'goods', ARGV[2], 'request', ARGV[3],
  'cost', goods[1], 'code', code, 'unit', unit, 'seq', seq > 0 and tostring(seq) or '', 'bucket', ARGV[6], 'at', tostring(now),
}
local entryId = redis.call('XADD', KEYS[6], '*', unpack(fields))
redis.call('SET', KEYS[5], ARGV[2] .. '|redeemed:' .. entryId, 'PX', ARGV[5])
return {'redeemed', entryId, fields}
