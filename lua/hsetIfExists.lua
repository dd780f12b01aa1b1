--[[
  Sets fields of a hash only if the hash exists: annotating a campaign's meta
  must never create a half-built campaign after its keys were lost.

  KEYS[1] the hash
  ARGV    field, value, field, value …

  Returns {'set'}, or {'missing'} when the hash is missing.
]]
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'missing'}
end
redis.call('HSET', KEYS[1], unpack(ARGV))
return {'set'}
