-- KEYS: the hash, then the lease keys of the renewals and of the leases to acquire. ARGV: owner, replica, jobs,
-- leaseMs, the number of renewals, their tokens, then the job names in the order of KEYS. Writes the member's
-- record and forgets the expired ones; renews each lease the owner holds with that token; takes each lease to
-- acquire that is free, as acquire-2.lua does. Returns the live members as owner, record pairs; a 1 or 0 per
-- renewal; and per lease taken or not, its token (0 when not taken) and its schedule's last, next and grid (empty
-- when none); the names of the jobs the fleet has paused, as JSON; the triggers carried; the fleet's epoch once
-- the leases were taken; and the name of the fleet's records, the field `fleet` of the hash, written as the owner
-- and the time when the hash has none (it went with the records: `PeriodicHeartbeatReply.fleet`). A lease taken is
-- handed over (hand-over.lua). Last, the count of changes to the stored schedules (write-stored-5.lua).

--- @include "members.lua"
--- @include "chunked.lua"
--- @include "schedule.lua"
--- @include "epoch.lua"
--- @include "hand-over.lua"
local owner, leaseMs, renewing = ARGV[1], tonumber(ARGV[4]), tonumber(ARGV[5])
local time = redis.call('TIME')
local nowMs = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local floor = tonumber(time[1]) * 1000000 + tonumber(time[2])
local live = beat(nowMs)
local names = 5 + renewing
local keys, fields = {}, {}
for i = 1, renewing do
  keys[i] = KEYS[1 + i]
  fields[i] = 'token:' .. ARGV[names + i]
end
local holders = chunked('MGET', nil, keys)
local tokens = chunked('HMGET', KEYS[1], fields)
local renewed = {}
for i = 1, renewing do
  if holders[i] == owner and tokens[i] == ARGV[5 + i] then
    redis.call('PEXPIRE', KEYS[1 + i], leaseMs)
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
local acquired, taken = {}, false
for i = 1, #KEYS - 1 - renewing do
  local key, name = KEYS[1 + renewing + i], ARGV[names + renewing + i]
  if redis.call('SET', key, owner, 'NX', 'PX', leaseMs) then
    local field = 'token:' .. name
    local token = string.format('%d', math.max(tonumber(redis.call('HGET', KEYS[1], field) or '0') + 1, floor))
    redis.call('HSET', KEYS[1], field, token)
    local last, next = stamp(KEYS[1], name, token)
    acquired[#acquired + 1] = token
    acquired[#acquired + 1] = last or ''
    acquired[#acquired + 1] = next or ''
    acquired[#acquired + 1] = last and redis.call('HGET', KEYS[1], 'grid:' .. name) or ''
    handOver(KEYS[1], name, owner)
    taken = true
  else
    for j = 1, 4 do acquired[#acquired + 1] = '' end
    acquired[#acquired - 3] = '0'
  end
end
local now = epoch(KEYS[1], floor, taken)
local carried = {}
local waiting = redis.call('HGET', KEYS[1], 'triggers')
if waiting then
  local left, kept = {}, {}
  for _, name in ipairs(cjson.decode(waiting)) do left[name] = true end
  for i = 1, renewing do
    local name = ARGV[names + i]
    if renewed[i] == 1 and left[name] then
      local requests = redis.call('HGET', KEYS[1], 'trigger:' .. name)
      if requests then carried[#carried + 1] = requests end
      redis.call('HDEL', KEYS[1], 'trigger:' .. name)
      left[name] = nil
    end
  end
  for name in pairs(left) do kept[#kept + 1] = name end
  if #kept == 0 then redis.call('HDEL', KEYS[1], 'triggers')
  else redis.call('HSET', KEYS[1], 'triggers', cjson.encode(kept)) end
end
local fleet = redis.call('HGET', KEYS[1], 'fleet')
if not fleet then
  fleet = owner .. ' ' .. time[1] .. '.' .. time[2]
  redis.call('HSET', KEYS[1], 'fleet', fleet)
end
return {live, renewed, acquired, redis.call('HGET', KEYS[1], 'paused') or '[]', table.concat(carried, '\n'), now, fleet,
  redis.call('HGET', KEYS[1], 'schedules') or '0'}
