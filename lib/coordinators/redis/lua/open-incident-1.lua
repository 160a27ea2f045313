-- KEYS: the hash; ARGV: job name, kind, the incident as JSON ({ since, detail }), the audit record, keep. Opens the
-- job's incident of that kind unless one is open, and prepends the record to the job's audit trail. The field
-- `incident:<name>` holds a job's open incidents, a JSON object of their JSON by kind, and the field `incidents`
-- the names of the jobs that have one, a JSON array. Answers 1 if it opened the incident, 0 if one was open.

--- @include "audit.lua"
local hash, name, kind, incident, record, keep = KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local field = 'incident:' .. name
local stored = redis.call('HGET', hash, field)
local open = stored and cjson.decode(stored) or {}
if open[kind] then return 0 end
open[kind] = incident
redis.call('HSET', hash, field, cjson.encode(open))
if not stored then
  local names = cjson.decode(redis.call('HGET', hash, 'incidents') or '[]')
  names[#names + 1] = name
  redis.call('HSET', hash, 'incidents', cjson.encode(names))
end
audit(hash, name, record, keep)
return 1
