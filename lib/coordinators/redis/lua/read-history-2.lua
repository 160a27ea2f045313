-- KEYS: the hash, job `name`'s list; ARGV: the job's name, how many elements of the list to read. The tail of the
-- job's history and its segments (history.lua), and the latest elements of its list.

--- @include "history.lua"
local tail, segments = history(KEYS[1], ARGV[1])
return {tail, segments, redis.call('LRANGE', KEYS[2], -tonumber(ARGV[2]), -1)}
