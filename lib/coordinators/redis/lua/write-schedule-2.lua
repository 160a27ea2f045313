-- KEYS: lease key, the hash; ARGV: owner, fencing token, job name, last, next, grid. Stores the job's schedule
-- if the owner holds the lease with that token and `last` does not go back: 1, else 0.

--- @include "schedule.lua"
local field, token, last = scheduleOf(KEYS[2], ARGV[3])
if redis.call('GET', KEYS[1]) ~= ARGV[1] or token ~= ARGV[2] or tonumber(ARGV[4]) < tonumber(last or '0') then
  return 0
end
redis.call('HSET', KEYS[2], field, ARGV[2] .. ' ' .. ARGV[4] .. ' ' .. ARGV[5], 'grid:' .. ARGV[3], ARGV[6])
return 1
