-- KEYS: the hash; ARGV: job name, kind, the audit record, keep. Closes the job's incident of that kind (see
-- open-incident-1.lua) and prepends the record to the job's audit trail. Answers the incident's JSON, or false
-- when none of that kind was open.

--- @include "audit.lua"
local hash, name, kind, record, keep = KEYS[1], ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local field = 'incident:' .. name
local stored = redis.call('HGET', hash, field)
local open = stored and cjson.decode(stored) or {}
local incident = open[kind]
if not incident then return false end
open[kind] = nil
if next(open) == nil then
  redis.call('HDEL', hash, field)
  local kept = {}
  for _, other in ipairs(cjson.decode(redis.call('HGET', hash, 'incidents') or '[]')) do
    if other ~= name then kept[#kept + 1] = other end
  end
  if #kept == 0 then redis.call('HDEL', hash, 'incidents')
  else redis.call('HSET', hash, 'incidents', cjson.encode(kept)) end
else
  redis.call('HSET', hash, field, cjson.encode(open))
end
audit(hash, name, record, keep)
return incident
