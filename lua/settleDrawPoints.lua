--[[
  Brings the cached balance in line with a draw payment PostgreSQL has settled: adds a
  released reservation back, or credits a POINTS prize, once per draw. A rebuild writes
  the marker of every settlement the ledger already counts, with the balance in one
  MULTI, so a settlement is never applied on top of a balance that holds it; while a
  balance is rebuilt its key is absent, and this answers 'missing'
  (src/domain/points/drawPayments.ts, applySettled).

  KEYS[1] {shop}:balance:<user>
  KEYS[2] {shop}:drawSettled:<draw>                    set once the change is in the cached balance
  KEYS[3] {shop}:drawHold:<user>:<activity>:<request>  the request's reservation (cleared on release)
  ARGV[1] draw id
  ARGV[2] the change (>= 0)
  ARGV[3] how long the marker is kept, in ms
  ARGV[4] '1': the reservation was released, so the request may reserve again

  Returns
    {'applied', balance}
    {'already'}            applied before (or counted by a rebuild): nothing changed
    {'missing'}            the balance is not cached: the next rebuild reads the ledger
]]
if ARGV[4] == '1' and redis.call('GET', KEYS[3]) == ARGV[1] then
  redis.call('DEL', KEYS[3])
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  return {'already'}
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'missing'}
end
redis.call('SET', KEYS[2], '1', 'PX', ARGV[3])
return {'applied', redis.call('INCRBY', KEYS[1], ARGV[2])}
