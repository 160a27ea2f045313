-- KEYS: as write-stored-5.lua's. ARGV: name, the version it must be at ('' for any), keep, the audit record of the
-- removal, the channel of changes. Removes the schedule, counts the change (its name stays in the sorted set of
-- changes, scored with it, for the replicas to read the removal; its version stays in the field `removed:<name>` of
-- the fleet's hash, for one created again to go on from) and records it in the audit trail. Answers
-- 'removed' or 'absent', or 'conflict' and the version it is at ('' when it does not exist).

--- @include "audit.lua"
--- @include "stored.lua"
local name, ifVersion = ARGV[1], ARGV[2]
local old = redis.call('HGET', KEYS[2], name)
local fields = old and storedFields(old)
local version = fields and tonumber(fields[1]) or 0
if ifVersion ~= '' and tonumber(ifVersion) ~= version then
  return 'conflict\t' .. (old and string.format('%d', version) or '')
end
if not old then return 'absent' end
local change = redis.call('HINCRBY', KEYS[1], 'schedules', 1)
redis.call('HDEL', KEYS[2], name)
redis.call('HSET', KEYS[1], 'removed:' .. name, fields[1])
redis.call('ZADD', KEYS[3], change, name)
redis.call('ZREM', KEYS[4], name)
redis.call('ZREM', KEYS[5], fields[5] .. '\0' .. name)
audit(KEYS[1], name, ARGV[4], tonumber(ARGV[3]))
redis.call('PUBLISH', ARGV[5], 'changed')
return 'removed'
