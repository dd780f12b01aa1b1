--[[
  Ends a packet now, by Redis time: grabs from now on answer expired. An expiry already
  sooner stays. Only while the meta exists, so a lost packet is not half rebuilt.

  KEYS[1] {rp:<id>}:meta   hash: expiresAtMs, ...

  Returns {'expired', expiresAtMs} with the expiry in force, or {'missing'}.
]]
-- @include "now.lua"

if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'missing'}
end
local now = now_ms()
local expires = tonumber(redis.call('HGET', KEYS[1], 'expiresAtMs'))
if expires > now then
  redis.call('HSET', KEYS[1], 'expiresAtMs', now)
  expires = now
end
return {'expired', expires}
