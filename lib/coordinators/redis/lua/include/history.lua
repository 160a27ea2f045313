-- history(hash, name) reads the tail of job `name`'s history as its latest holder (the field `holder:<name>`) left
-- it (RunTail), or empty; its segments, oldest first; and where they are.

--- @include "key-of.lua"
local function history(hash, name)
  local holder = redis.call('HGET', hash, 'holder:' .. name)
  local tails = holder and keyOf(hash, '${KEY_KINDS.tails}', holder)
  local tail = tails and redis.call('HGET', tails, 't:' .. name)
  if not tail then return '', {} end
  local segments, slots = string.match(tail, '^%d+ %d+ (%d+) (%d+)')
  local found = {}
  segments, slots = tonumber(segments or '0'), tonumber(slots or '1')
  for n = math.max(0, segments - slots), segments - 1 do
    local segment = redis.call('HGET', tails, 's' .. (n % slots) .. ':' .. name)
    if segment then found[#found + 1] = segment end
  end
  return tail, found, tails
end
