--[[
  Claims the key prefix for a database: its live state in Redis belongs to one database.
  Owners are '<kind>:<id>' ('pglite:…' or 'postgresql:…'); 'clearing:<owner>' marks a
  takeover whose deletion of the old keys has not finished, so an interrupted one is
  resumed by its database and refused to every other.

  KEYS[1] the owner key
  ARGV[1] this database, '<kind>:<id>'
  ARGV[2] '1' when this database may take over a prefix an embedded database owns
          (it was created by this start: the old one was deleted with its folder)

  Returns {'claimed'} ({'claimedAnew'} when no owner was set: a first start, or a
  Redis that lost its data), {'clear'} (delete the prefix's other keys, then set the
  owner), or {'refused', owner}.
]]
local owner = redis.call('GET', KEYS[1])
if owner == ARGV[1] then
  return {'claimed'}
end
if not owner then
  redis.call('SET', KEYS[1], ARGV[1])
  return {'claimedAnew'}
end
if owner == 'clearing:' .. ARGV[1] then
  return {'clear'}
end
if ARGV[2] == '1' and string.sub(owner, 1, 7) == 'pglite:' then
  redis.call('SET', KEYS[1], 'clearing:' .. ARGV[1])
  return {'clear'}
end
return {'refused', owner}
