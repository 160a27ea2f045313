-- KEYS: lease key, the hash of the jobs' counters and schedules; ARGV: owner, leaseMs, job name. Takes the lease
-- unless it is held; on success the job's fencing token becomes the larger of the last one plus one and Redis's
-- clock in microseconds, so that it grows even when Redis lost the counters (a restart without persistence,
-- FLUSHALL, a failover), and the fleet's epoch moves on. Returns the token, or 0 when the lease is held. Lua
-- numbers are doubles: the token is stored through string.format('%d'), exact up to 2^53.

--- @include "schedule.lua"
--- @include "epoch.lua"
--- @include "hand-over.lua"
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 0
end
local time = redis.call('TIME')
local floor = tonumber(time[1]) * 1000000 + tonumber(time[2])
local field = 'token:' .. ARGV[3]
local token = string.format('%d', math.max(tonumber(redis.call('HGET', KEYS[2], field) or '0') + 1, floor))
redis.call('HSET', KEYS[2], field, token)
stamp(KEYS[2], ARGV[3], token)
epoch(KEYS[2], floor, true)
handOver(KEYS[2], ARGV[3], ARGV[1])
return tonumber(token)
