--[[
  Writes an operator's terms into one bucket's copy of a goods item, only while the copy
  exists (a rebuild reads them from PostgreSQL). An end already passed by Redis time ends
  a sale still selling here at the next millisecond, so every redemption this bucket made
  (dated now at the latest) is dated before it; a sale that had ended keeps its end.

  KEYS[1] the bucket's goods hash: pointsCost, onSale, saleStartsAtMs, saleEndsAtMs, ...
  ARGV[1] pointsCost
  ARGV[2] onSale, '1' or '0'
  ARGV[3] saleStartsAtMs, '' for no start
  ARGV[4] saleEndsAtMs, '' for no end

  Returns {'set', saleEndsAtMs} with the end written ('' for none), or {'missing'}.
]]
-- @include "now.lua"

if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'missing'}
end
local ends = tonumber(ARGV[4])
if ends then
  local now = now_ms()
  local current = tonumber(redis.call('HGET', KEYS[1], 'saleEndsAtMs'))
  if ends <= now then
    if current and current <= now then
      ends = current
    else
      ends = now + 1
    end
  end
end
local written = ends and string.format('%d', ends) or ''
redis.call('HSET', KEYS[1], 'pointsCost', ARGV[1], 'onSale', ARGV[2], 'saleStartsAtMs', ARGV[3], 'saleEndsAtMs', written)
return {'set', written}
