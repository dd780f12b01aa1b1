--[[
  Records a goods item as sold out in every shop bucket (src/domain/points/stockTransfers.ts),
  only if the check that found every bucket dry still stands: the check wrote its token
  before reading the buckets, and whatever added stock since (a give, a rebuilt share
  with stock) deleted it. So a verdict reached on reads that missed new stock is never
  recorded. Redemptions of a dry bucket read the verdict instead of queueing for the
  item's transfer lock to be told the same.

  KEYS[1] {shop}:goods:<goods>:soldOut   the check's token while it reads, 'soldOut' once recorded
  ARGV[1] the check's token
  ARGV[2] how long the verdict stands, in ms

  Returns {'marked'}, or {'stale'} when stock was added since the check began.
]]
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {'stale'}
end
redis.call('SET', KEYS[1], 'soldOut', 'PX', ARGV[2])
return {'marked'}
