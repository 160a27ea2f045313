-- KEYS: a sorted set of names (all of them, or a handler's as `<handler>\0<name>`), the hash of stored schedules.
-- ARGV: the lexicographic bound to start from (`[` or `(` and a member), the beginning every member must have,
-- and how many to read at most. Answers per schedule its name and record, in the order of the members.

local base, cut = ARGV[2], #ARGV[2]
local members = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[1], '+', 'LIMIT', 0, tonumber(ARGV[3]))
local found = {}
for _, member in ipairs(members) do
  if string.sub(member, 1, cut) ~= base then break end
  local name = member
  local zero = string.find(member, '\0', 1, true)
  if zero then name = string.sub(member, zero + 1) end
  found[#found + 1] = name
  found[#found + 1] = redis.call('HGET', KEYS[2], name) or ''
end
return found
