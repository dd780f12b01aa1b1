--[[
  Ends a packet now, by Redis time: the expiry becomes the next millisecond, so every
  grab granted before (dated now at the latest) is dated before it. An expiry already
  sooner stays. Only while the meta exists, so a lost packet is not half rebuilt.

  KEYS[1] {rp:<id>}:meta   hash: expiresAtMs, ...

  Returns {'expired', expiresAtMs} with the expiry in force, or {'missing'}.
]]
-- @include "now.lua"

if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'missing'}
end
local ends = now_ms() + 1
local expires = tonumber(redis.call('HGET', KEYS[1], 'expiresAtMs'))
if expires > ends then
  redis.call('HSET', KEYS[1], 'expiresAtMs', ends)
  expires = ends
end
return {'expired', expires}
