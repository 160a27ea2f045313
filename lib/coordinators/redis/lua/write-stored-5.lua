-- KEYS: the fleet's hash, the hash of stored schedules, the sorted set of their changes (each name scored with the
-- count of the last change to it, removals included), that of their names and that of their handlers' names
-- (`<handler>\0<name>`, lexicographic). ARGV: keep, who (JSON), when (ms), the audit records of a creation and of
-- an update, the channel of changes, then four per write: name, handler, definition and the version it must be
-- at ('' for any; 0: it must not exist). Each write that may be made is: its version one more (one created again
-- goes on from the version it was removed at, the field `removed:<name>` of the fleet's hash), the count of
-- changes (the field `schedules` of the fleet's hash) one more, and an entry in its audit trail. Answers per
-- write 'created' or 'updated' and its record (stored.lua), or 'conflict' and the version it is at ('' when it
-- does not exist), a tab between.

--- @include "audit.lua"
--- @include "stored.lua"
local keep, by, at = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local answers, changed = {}, false
for i = 7, #ARGV, 4 do
  local name, handler, definition, ifVersion = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local old = redis.call('HGET', KEYS[2], name)
  local version, createdAt, before, last = 0, at, nil, 0
  if old then
    local fields = storedFields(old)
    version, createdAt, before = tonumber(fields[1]), fields[2], fields[5]
    last = version
  else
    last = tonumber(redis.call('HGET', KEYS[1], 'removed:' .. name) or '0')
  end
  if ifVersion ~= '' and tonumber(ifVersion) ~= version then
    answers[#answers + 1] = 'conflict\t' .. (old and string.format('%d', version) or '')
  else
    version = last
    redis.call('HDEL', KEYS[1], 'removed:' .. name)
    local change = redis.call('HINCRBY', KEYS[1], 'schedules', 1)
    local record = string.format('%d', version + 1) .. '\t' .. createdAt .. '\t' .. at .. '\t' ..
      string.format('%d', change) .. '\t' .. handler .. '\t' .. by .. '\t' .. definition
    redis.call('HSET', KEYS[2], name, record)
    redis.call('ZADD', KEYS[3], change, name)
    redis.call('ZADD', KEYS[4], 0, name)
    if before and before ~= handler then redis.call('ZREM', KEYS[5], before .. '\0' .. name) end
    redis.call('ZADD', KEYS[5], 0, handler .. '\0' .. name)
    audit(KEYS[1], name, old and ARGV[5] or ARGV[4], keep)
    answers[#answers + 1] = (old and 'updated\t' or 'created\t') .. record
    changed = true
  end
end
if changed then redis.call('PUBLISH', ARGV[6], 'changed') end
return answers
