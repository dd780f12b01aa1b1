--[[
  Extends a lock's lease only if the caller still holds it: a holder whose work runs
  longer than one lease keeps others out, and one whose lease already ran out takes
  nothing back from the instance that holds the lock now.

  KEYS[1] the lock
  ARGV[1] the holder's token
  ARGV[2] the new lease, in milliseconds

  Returns {'renewed'}, or {'notHeld'} when the lock was not ours (or gone).
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {'renewed'}
end
return {'notHeld'}
