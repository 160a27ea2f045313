-- handOver(hash, name, owner): `owner` takes job `name`, whose latest holder is the field `holder:<name>`. The
-- history that the holder before left, its segments and its tail (RunTail), goes to the end of the job's list, and
-- the tail's success and failures to the fields `ok:<name>` and `failed:<name>` (as record.lua keeps them), so
-- that the new holder starts a history of its own. A tail that `owner` left of an earlier holding, written after
-- that holding was handed over (a write delayed past its lease), is deleted: its runs and counts were moved then.
-- The list is cut back to the latest runs of `keep` at least, `keep` as the tail's ring tells it (RunTail): an
-- element holds a run, or a segment or tail of them.

--- @include "history.lua"
local function forget(tails, name, slots)
  local fields = {'t:' .. name}
  for i = 0, slots - 1 do fields[#fields + 1] = 's' .. i .. ':' .. name end
  redis.call('HDEL', tails, unpack(fields))
end
local function trim(list, keep)
  local elements, runs = redis.call('LRANGE', list, -keep, -1), 0
  for i = #elements, 1, -1 do
    local element = elements[i]
    if string.sub(element, 1, 2) == 'S\n' then
      runs = runs + select(2, string.gsub(element, '\n', '')) - 1
    else
      runs = runs + 1
    end
    if runs >= keep then return redis.call('LTRIM', list, i - #elements - 1, -1) end
  end
end
local function handOver(hash, name, owner)
  local tail, segments, tails = history(hash, name)
  redis.call('HSET', hash, 'holder:' .. name, owner)
  local stale = keyOf(hash, '${KEY_KINDS.tails}', owner)
  if stale ~= tails then
    local left = redis.call('HGET', stale, 't:' .. name)
    if left then forget(stale, name, tonumber(string.match(left, '^%d+ %d+ %d+ (%d+)') or '0')) end
  end
  if tail == '' then return end
  local list = keyOf(hash, '${KEY_KINDS.runs}', name)
  for _, segment in ipairs(segments) do redis.call('RPUSH', list, segment) end
  local okAt, failures, slots, records = string.match(tail, '^(%d+) (%d+) %d+ (%d+)\n?(.*)$')
  slots = tonumber(slots or '1')
  if records and records ~= '' then redis.call('RPUSH', list, 'S\n' .. records) end
  forget(tails, name, slots)
  trim(list, ${SEGMENT} * (slots - 1))
  if not okAt then return end
  local stored = redis.call('HMGET', hash, 'ok:' .. name, 'failed:' .. name)
  local since, count = stored[1] or '', tonumber(failures)
  if okAt ~= '0' and tonumber(okAt) > tonumber(since == '' and '0' or since) then
    since = okAt
    redis.call('HSET', hash, 'ok:' .. name, okAt)
  else
    local space = stored[2] and string.find(stored[2], ' ', 1, true)
    if space and string.sub(stored[2], space + 1) == since then
      count = count + tonumber(string.sub(stored[2], 1, space - 1))
    end
  end
  if count > 0 or stored[2] then redis.call('HSET', hash, 'failed:' .. name, count .. ' ' .. since) end
end
