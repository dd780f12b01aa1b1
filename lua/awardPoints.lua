--[[
  Applies an award (or a correction) that PostgreSQL has already committed to the
  cached balance. The caller holds the balance's hydration lock, so no rebuild is
  writing the key meanwhile.

  KEYS[1] {shop}:balance:<user>
  ARGV[1] the change, negative for a correction

  Returns the new balance, or -1 (nothing changed) when the key is missing or when the
  change would take it below zero, which happens when redemptions not yet in PostgreSQL
  spent the points. The caller then reloads the balance from PostgreSQL; the reload
  persists those redemptions first, and PostgreSQL refuses the ones the balance no
  longer covers.
]]
local balance = redis.call('GET', KEYS[1])
if not balance or tonumber(balance) + tonumber(ARGV[1]) < 0 then
  return -1
end
return redis.call('INCRBY', KEYS[1], ARGV[1])
