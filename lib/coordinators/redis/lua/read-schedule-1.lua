-- KEYS: the hash; ARGV: job name. The job's schedule as [last, next, grid], each false if missing.

--- @include "schedule.lua"
local _, _, last, next = scheduleOf(KEYS[1], ARGV[1])
return {last or false, next or false, redis.call('HGET', KEYS[1], 'grid:' .. ARGV[1])}
