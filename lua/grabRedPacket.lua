--[[
  Hands one pre-split share of a red packet to one user, and journals the grant.

  KEYS[1] {rp:<id>}:meta     hash: expiresAtMs, remainingCount, remainingAmount, ...
  KEYS[2] {rp:<id>}:shares   list of "<shareIndex>:<amount>" not yet handed out
  KEYS[3] {rp:<id>}:grabs    hash: userId -> "<shareIndex>:<amount>:<grabbedAtMs>"
  KEYS[4] {rp:<id>}:journal  stream of grants waiting for PostgreSQL
  ARGV[1] user id
  ARGV[2] grant id, minted by the caller
  ARGV[3] packet id

  Returns
    {'missing'}                                       meta missing: rebuild from PostgreSQL, then retry
    {'granted', shareIndex, amount, remainingCount, grabbedAtMs, entryId, entryFields}
    {'already', shareIndex, amount, grabbedAtMs}      the user already holds a share
    {'empty'}                                         no share left
    {'expired'}                                       the packet has expired
]]
-- @include "now.lua"

if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'missing'}
end

local previous = redis.call('HGET', KEYS[3], ARGV[1])
if previous then
  local index, amount, at = string.match(previous, '^(%d+):(%d+):(%d+)$')
  return {'already', tonumber(index), tonumber(amount), tonumber(at)}
end

if redis.call('LLEN', KEYS[2]) == 0 then
  if tonumber(redis.call('HGET', KEYS[1], 'remainingCount')) > 0 then
    -- The share list was lost while meta survived: drop meta so the caller rebuilds from PostgreSQL.
    redis.call('DEL', KEYS[1])
    return {'missing'}
  end
  return {'empty'}
end

local now = now_ms()
if now >= tonumber(redis.call('HGET', KEYS[1], 'expiresAtMs')) then
  return {'expired'}
end

local index, amount = string.match(redis.call('LPOP', KEYS[2]), '^(%d+):(%d+)$')
if redis.call('HSET', KEYS[3], ARGV[1], index .. ':' .. amount .. ':' .. now) == 1 and redis.call('HLEN', KEYS[3]) == 1 then
  -- The first grab creates the hash: it goes when meta goes (PEXPIRETIME: Redis 7).
  redis.call('PEXPIREAT', KEYS[3], redis.call('PEXPIRETIME', KEYS[1]))
end
local remaining = redis.call('HINCRBY', KEYS[1], 'remainingCount', -1)
redis.call('HINCRBY', KEYS[1], 'remainingAmount', -tonumber(amount))

local fields = {
  'kind', 'redPacket.grab', 'grant', ARGV[2], 'packet', ARGV[3], 'user', ARGV[1],
  'index', index, 'amount', amount, 'at', tostring(now),
}
local entryId = redis.call('XADD', KEYS[4], '*', unpack(fields))
return {'granted', tonumber(index), tonumber(amount), remaining, now, entryId, fields}
