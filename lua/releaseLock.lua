--[[
  Releases a lock only if the caller still holds it: after the lock's TTL another
  instance may hold it, and a plain DEL would take that one away.

  KEYS[1] the lock
  ARGV[1] the holder's token

  Returns {'released'}, or {'notHeld'} when the lock was not ours (or gone).
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return {'released'}
end
return {'notHeld'}
