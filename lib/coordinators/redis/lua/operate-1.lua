-- KEYS: the hash; ARGV: job name, action, the operation as JSON, keep. Prepends the operation to the job's audit
-- trail, the field `audit:<name>` (JSON records, newest first, one per line, the latest `keep` kept); a pause
-- is the field `pause:<name>` and the name in `paused` until a resume deletes both.

--- @include "audit.lua"
local name, action, record, keep = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
audit(KEYS[1], name, record, keep)
if action == 'trigger' then return 1 end
local kept = {}
for _, other in ipairs(cjson.decode(redis.call('HGET', KEYS[1], 'paused') or '[]')) do
  if other ~= name then kept[#kept + 1] = other end
end
if action == 'pause' then
  kept[#kept + 1] = name
  redis.call('HSET', KEYS[1], 'pause:' .. name, record)
else
  redis.call('HDEL', KEYS[1], 'pause:' .. name)
end
if #kept == 0 then redis.call('HDEL', KEYS[1], 'paused')
else redis.call('HSET', KEYS[1], 'paused', cjson.encode(kept)) end
return 1
