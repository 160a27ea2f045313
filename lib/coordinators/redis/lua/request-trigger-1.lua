-- KEYS: the hash; ARGV: job name, the trigger as JSON. Leaves the trigger for the holder: a line of the field
-- `trigger:<name>`, and the name in the field `triggers` (a JSON array), which heartbeats look at.

local name = ARGV[1]
local field = 'trigger:' .. name
local requests = redis.call('HGET', KEYS[1], field)
redis.call('HSET', KEYS[1], field, requests and (requests .. '\n' .. ARGV[2]) or ARGV[2])
local names = cjson.decode(redis.call('HGET', KEYS[1], 'triggers') or '[]')
for _, other in ipairs(names) do
  if other == name then return 1 end
end
names[#names + 1] = name
redis.call('HSET', KEYS[1], 'triggers', cjson.encode(names))
return 1
