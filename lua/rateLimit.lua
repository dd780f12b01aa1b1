--[[
  Fixed-window counter for per-user request limits.

  KEYS[1] ratelimit:<scope>:<user>
  ARGV[1] limit per window
  ARGV[2] window length in ms

  Returns {allowed (1 or 0), ms until the window resets}
]]
local count = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  ttl = tonumber(ARGV[2])
end
if count > tonumber(ARGV[1]) then
  return {0, ttl}
end
return {1, ttl}
