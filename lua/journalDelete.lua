--[[
  Deletes a batch's committed entries from their journal stream, and tells which it
  did not hold. An entry only this batch persisted is missing when Redis lost the
  stream with it, and with it the keys its script changed (see Journal.commitBatch).

  KEYS[1] the journal stream
  ARGV    the entries' ids

  Returns {'deleted', {id, ...}}: the ids the stream did not hold.
]]
local missing = {}
for _, id in ipairs(ARGV) do
  if redis.call('XDEL', KEYS[1], id) == 0 then missing[#missing + 1] = id end
end
return {'deleted', missing}
