--[[
  Deletes a batch's committed entries from their journal stream, and tells which of the
  entries the batch persisted first the stream had lost: those it did not hold and no
  other committer deleted. An entry is missing either because another committer replayed it
  beside this batch and deleted it first, or because Redis lost the stream, and with it
  the keys its script changed (see Journal.forgetLost). Only the second needs a rebuild,
  which drops whatever lives only in Redis (a team's seat locks), so any other
  committer that deletes an entry notes its id in KEYS[2] for a while.

  KEYS[1] the journal stream
  KEYS[2] zset of the stream: entry id -> Redis time (ms) another committer deleted it
  ARGV[1] n: the first n ids are those the batch persisted first
  ARGV[2..] the entries' ids: the n persisted first, then the others' (replays, conflicts)

  Returns {'deleted', {id, ...}}: the ids persisted first that the stream had lost.
]]
-- @include "now.lua"

-- Far longer than a commit takes from its statement to this delete.
local NOTE_KEPT_MS = 15 * 60 * 1000

local stream, deleted_by_others = KEYS[1], KEYS[2]
local persisted_first = tonumber(ARGV[1])
local missing = {}
-- Redis time, read only when a note is written: most batches delete only their own entries.
local now
for i = 2, #ARGV do
  local id = ARGV[i]
  local deleted = redis.call('XDEL', stream, id) == 1
  if i - 1 > persisted_first then
    if deleted then
      now = now or now_ms()
      redis.call('ZADD', deleted_by_others, now, id)
    end
  elseif not deleted and not redis.call('ZSCORE', deleted_by_others, id) then
    missing[#missing + 1] = id
  end
end
if now then
  redis.call('ZREMRANGEBYSCORE', deleted_by_others, '-inf', now - NOTE_KEPT_MS)
  redis.call('PEXPIRE', deleted_by_others, NOTE_KEPT_MS)
end
return {'deleted', missing}
