-- KEYS: the hash; ARGV: the most jobs to answer. Answers the open incidents (see open-incident-1.lua) of at most
-- that many jobs: each job's name, then its field `incident:<name>`.

local hash, limit = KEYS[1], tonumber(ARGV[1])
local reply = {}
for i, name in ipairs(cjson.decode(redis.call('HGET', hash, 'incidents') or '[]')) do
  if i > limit then break end
  local open = redis.call('HGET', hash, 'incident:' .. name)
  if open then
    reply[#reply + 1] = name
    reply[#reply + 1] = open
  end
end
return reply
