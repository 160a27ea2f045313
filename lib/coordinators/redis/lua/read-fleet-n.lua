-- KEYS: the hash, then per job its lease key and its history list; ARGV: the job names. Per job: the lease's
-- holder (empty if none), its time to live in ms, the field token of the hash, the last and next slots of its
-- schedule field, the fields grid, pause, ok and failed (each empty when missing), the two newest elements of
-- its list (a record, or a segment of them: the list is in the order runs were handed over or recorded, a record
-- replaced in place when its run ends), and the tail of its history and its latest segment (history.lua); first of
-- all, Redis's clock in ms.

--- @include "schedule.lua"
--- @include "history.lua"
local time = redis.call('TIME')
local reply = {string.format('%d', tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000))}
for i = 1, #ARGV do
  local name, lease = ARGV[i], KEYS[2 * i]
  reply[#reply + 1] = redis.call('GET', lease) or ''
  reply[#reply + 1] = redis.call('PTTL', lease)
  local fields = redis.call('HMGET', KEYS[1], 'token:' .. name, 'grid:' .. name, 'pause:' .. name, 'ok:' .. name,
    'failed:' .. name)
  local _, _, last, next = scheduleOf(KEYS[1], name)
  reply[#reply + 1] = fields[1] or ''
  reply[#reply + 1] = last or ''
  reply[#reply + 1] = next or ''
  for j = 2, 5 do reply[#reply + 1] = fields[j] or '' end
  reply[#reply + 1] = redis.call('LRANGE', KEYS[2 * i + 1], -2, -1)
  local tail, segments = history(KEYS[1], name)
  reply[#reply + 1] = tail
  reply[#reply + 1] = segments[#segments] or ''
end
return reply
