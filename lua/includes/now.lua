-- Redis TIME in milliseconds. Scripts never trust the calling app's clock.
local function now_ms()
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end
