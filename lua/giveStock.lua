--[[
  The second half of a stock transfer (lua/takeStock.lua): adds a committed take's units
  to the receiving bucket's share, once per transfer (a marker, which a rebuild writes
  for the transfers PostgreSQL already counts), and journals the give.

  KEYS[1] {shop:<to>}:goods:<goods>                hash: stock (the bucket's allotment), remaining
  KEYS[2] {shop:<to>}:goods:<goods>:codes          the bucket's free voucher codes
  KEYS[3] {shop:<to>}:stockGiven:<transfer>        set once the transfer is in the bucket
  KEYS[4] {shop:<to>}:journal
  ARGV[1] transfer id
  ARGV[2] give id, minted by the caller
  ARGV[3] goods id
  ARGV[4] receiving bucket
  ARGV[5] units
  ARGV[6] the codes carried, a JSON array ('[]' without a pool)
  ARGV[7] how long the marker is kept, in ms

  Returns
    {'missing'}                          the goods item is missing in the bucket: rebuild, then retry
    {'already'}                          given before (or counted by a rebuild): nothing changed
    {'given', entryId, entryFields}
]]
-- @include "now.lua"

if redis.call('EXISTS', KEYS[3]) == 1 then
  return {'already'}
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'missing'}
end
local units = tonumber(ARGV[5])
local codes = cjson.decode(ARGV[6])
-- In slices: unpack() of more than about 8,000 values overflows Lua's stack, and a restock
-- carries up to 10,000 codes to one bucket.
for first = 1, #codes, 1000 do
  redis.call('RPUSH', KEYS[2], unpack(codes, first, math.min(first + 999, #codes)))
end
redis.call('HINCRBY', KEYS[1], 'remaining', units)
redis.call('HINCRBY', KEYS[1], 'stock', units)
redis.call('SET', KEYS[3], ARGV[2], 'PX', ARGV[7])
local fields = {
  'kind', 'points.giveStock', 'give', ARGV[2], 'transfer', ARGV[1], 'goods', ARGV[3], 'to', ARGV[4], 'at', tostring(now_ms()),
}
return {'given', redis.call('XADD', KEYS[4], '*', unpack(fields)), fields}
