-- KEYS: the hash. ARGV: owner, the fleet's epoch as the owner's last heartbeat read it, the number of claims, then
-- field and value pairs: the claims' schedule fields (`schedule:<name>`, `<token> <last> <next>`), then grids.
-- Writes them as they are, if the owner's member record lives and the epoch is still that one: each of these jobs'
-- leases was renewed or taken by that heartbeat, and none has changed hands since (epoch.lua), so a claim needs no
-- read of its job's field. Returns per claim 1, or 2 for a job the fleet has paused; or 0, having written nothing,
-- when the epoch has moved on or the member record has expired: the owner's writes are then checked one by one
-- (write-schedules-n.lua) until its next heartbeat. This is the common case, a fleet whose leases stay where they
-- are, and it costs Redis two arguments and a field per claim, where the checked write costs four, a read and a
-- field.

--- @include "chunked.lua"
local claims = tonumber(ARGV[3])
local time = redis.call('TIME')
local nowMs = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local member = redis.call('HGET', KEYS[1], 'member:' .. ARGV[1])
if not member or tonumber(string.sub(member, 1, string.find(member, '\t', 1, true) - 1)) <= nowMs
  or redis.call('HGET', KEYS[1], 'epoch') ~= ARGV[2] then
  return 0
end
local taken = {}
for i = 1, claims do taken[i] = 1 end
local paused = redis.call('HGET', KEYS[1], 'paused')
if paused and paused ~= '[]' then
  local names = {}
  for _, name in ipairs(cjson.decode(paused)) do names[name] = true end
  for i = 1, claims do
    if names[string.sub(ARGV[2 + 2 * i], 10)] then taken[i] = 2 end
  end
end
chunked('HSET', KEYS[1], ARGV, 4)
return taken
