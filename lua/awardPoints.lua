--[[
  Applies an award (or a correction) that PostgreSQL has already committed to the
  cached balance. The caller holds the balance's rebuild lock, so no rebuild is
  writing the key meanwhile.

  KEYS[1] {shop}:balance:<user>
  ARGV[1] the change, negative for a correction

  Returns
    {'applied', balance}   the new balance
    {'missing'}            the key is missing: nothing changed
    {'belowZero'}          nothing changed: redemptions not yet in PostgreSQL spent the points

  On either refusal the caller reloads the balance from PostgreSQL; the reload persists
  those redemptions first, and PostgreSQL refuses the ones the balance no longer covers.
]]
local balance = redis.call('GET', KEYS[1])
if not balance then
  return {'missing'}
end
if tonumber(balance) + tonumber(ARGV[1]) < 0 then
  return {'belowZero'}
end
return {'applied', redis.call('INCRBY', KEYS[1], ARGV[1])}
