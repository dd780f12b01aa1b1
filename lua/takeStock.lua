--[[
  The first half of a stock transfer between shop buckets (src/domain/points/stockTransfers.ts):
  takes half of the donor bucket's remaining stock of a goods item (rounded up, so a last
  unit moves too) out of its share, and journals the take. Committed, the units are in
  flight: counted by their transfer row in PostgreSQL and by no bucket, until
  lua/giveStock.lua gives them to the receiver. Units leave only from what is not handed
  out, so a take never makes stock, and never takes a unit a redemption holds.

  KEYS[1] {shop:<donor>}:goods:<goods>         hash: stock (the bucket's allotment), remaining, pooled
  KEYS[2] {shop:<donor>}:goods:<goods>:codes   the bucket's free voucher codes (pooled goods)
  KEYS[3] {shop:<donor>}:journal
  ARGV[1] transfer id, minted by the caller
  ARGV[2] goods id
  ARGV[3] donor bucket
  ARGV[4] receiving bucket

  Returns
    {'missing'}                          the goods item is missing in the bucket: rebuild, then retry
    {'empty'}                            the donor has nothing left: nothing changed
    {'taken', entryId, entryFields}      fields: units, and codes (a JSON array, pooled goods)
]]
-- @include "now.lua"

if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'missing'}
end
local goods = redis.call('HMGET', KEYS[1], 'remaining', 'pooled')
local remaining = tonumber(goods[1])
if remaining <= 0 then
  return {'empty'}
end
local units = math.ceil(remaining / 2)
local codes = '[]'
if goods[2] == '1' then
  -- From the tail: the codes handed out next stay in order. remaining and the pool's
  -- length move together; the codes taken are what moves, whatever remaining says.
  local taken = redis.call('RPOP', KEYS[2], units) or {}
  units = #taken
  if units == 0 then
    return {'empty'}
  end
  codes = cjson.encode(taken)
end
redis.call('HINCRBY', KEYS[1], 'remaining', -units)
redis.call('HINCRBY', KEYS[1], 'stock', -units)
local fields = {
  'kind', 'points.takeStock', 'transfer', ARGV[1], 'goods', ARGV[2], 'from', ARGV[3], 'to', ARGV[4],
  'units', tostring(units), 'codes', codes, 'at', tostring(now_ms()),
}
return {'taken', redis.call('XADD', KEYS[3], '*', unpack(fields)), fields}
