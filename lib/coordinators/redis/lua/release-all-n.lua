-- KEYS: the hash, then the lease keys; ARGV: owner, leave (1 or 0), then per lease its job name and token.
-- Deletes each lease the owner holds with that token; with leave, forgets the owner's member record.

--- @include "members.lua"
for i = 1, #KEYS - 1 do
  local name, token = ARGV[1 + 2 * i], ARGV[2 + 2 * i]
  if redis.call('GET', KEYS[1 + i]) == ARGV[1] and redis.call('HGET', KEYS[1], 'token:' .. name) == token then
    redis.call('DEL', KEYS[1 + i])
  end
end
if ARGV[2] == '1' then
  redis.call('HDEL', KEYS[1], 'member:' .. ARGV[1])
  local time = redis.call('TIME')
  members(tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000), nil)
end
return 1
