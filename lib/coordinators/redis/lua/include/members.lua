-- The members of the fleet, kept in the hash: the field `members` lists their owners, one per line, and the field
-- `member:<owner>` holds each one's record (its expiry in ms on Redis's clock, a tab, its name, a tab, its jobs).
-- ARGV[1] is the owner of the replica that runs the script. members(nowMs) forgets the expired records and
-- returns the live members as owner, name-and-jobs pairs; beat(nowMs) writes the replica's record first (its name
-- ARGV[2], its jobs ARGV[3], until leaseMs ARGV[4] from now), and returns them too.

local function members(nowMs, record)
  local list = redis.call('HGET', KEYS[1], 'members') or ''
  local live, found, seen = {}, {}, false
  for other in string.gmatch(list, '[^\n]+') do
    local stored = record
    if other ~= ARGV[1] then stored = redis.call('HGET', KEYS[1], 'member:' .. other) end
    local tab = stored and string.find(stored, '\t', 1, true)
    if tab and tonumber(string.sub(stored, 1, tab - 1)) > nowMs then
      live[#live + 1] = other
      found[#found + 1] = other
      found[#found + 1] = string.sub(stored, tab + 1)
      if other == ARGV[1] then seen = true end
    else
      redis.call('HDEL', KEYS[1], 'member:' .. other)
    end
  end
  if record and not seen then
    live[#live + 1] = ARGV[1]
    found[#found + 1] = ARGV[1]
    found[#found + 1] = string.sub(record, string.find(record, '\t', 1, true) + 1)
  end
  local joined = table.concat(live, '\n')
  if joined ~= list then redis.call('HSET', KEYS[1], 'members', joined) end
  return found
end
local function beat(nowMs)
  local record = string.format('%d', nowMs + tonumber(ARGV[4])) .. '\t' .. ARGV[2] .. '\t' .. ARGV[3]
  redis.call('HSET', KEYS[1], 'member:' .. ARGV[1], record)
  return members(nowMs, record)
end
