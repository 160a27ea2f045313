-- KEYS: the fleet's hash, the sorted set of changes, the hash of stored schedules. ARGV: the count of changes
-- read already, and how many to read at most. Answers the count of changes now, 1 if no change is left after
-- those answered (else 0), and per change its name, its count and the schedule's record ('' once removed).

local since, limit = ARGV[1], tonumber(ARGV[2])
local found = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. since, '+inf', 'WITHSCORES', 'LIMIT', 0, limit + 1)
local changes = {}
for i = 1, math.min(#found / 2, limit) do
  local name = found[2 * i - 1]
  changes[#changes + 1] = name
  changes[#changes + 1] = found[2 * i]
  changes[#changes + 1] = redis.call('HGET', KEYS[3], name) or ''
end
return {redis.call('HGET', KEYS[1], 'schedules') or '0', #found / 2 > limit and 0 or 1, changes}
