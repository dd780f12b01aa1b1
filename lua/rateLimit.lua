--[[
  Fixed-window budget for per-user and per-address request limits.

  KEYS[1] ratelimit:<scope>:<who>
  ARGV[1] units per window
  ARGV[2] window length in ms
  ARGV[3] units this request costs (an operation with 15 mutations costs 15)

  A refused request takes nothing from the budget.
  Returns {'allowed', ms until the window resets} or {'refused', ms until it resets}.
]]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then ttl = window end
if used + cost > limit then
  return {'refused', ttl}
end
if redis.call('INCRBY', KEYS[1], cost) == cost then
  redis.call('PEXPIRE', KEYS[1], window)
end
return {'allowed', ttl}
