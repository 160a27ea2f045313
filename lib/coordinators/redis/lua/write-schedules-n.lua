-- KEYS: the hash, then the history lists of the runs to record. ARGV: owner, the number of writes, keep; then, per
-- write, its schedule field (`schedule:<name>`); per write, the field's new value (`<token> <last> <next>`); per
-- write, its token; per write, its last slot; the number of grids written, and per grid the index of its write,
-- `grid:<name>` and the grid (a job's grid goes again only under a new token); then the runs to record
-- (record.lua). A claim reads one field and writes it, and the arguments come ready-made, so that Lua makes one
-- string of its own per claim (the last slot stored): Lua's strings cost Redis more than its commands do. Writes
-- each schedule as write-schedule-2.lua does, a 1 or 0 for each, but for the check that the owner still holds the
-- lease: it holds it while its member record lives and the token is the job's latest. A heartbeat renews all the
-- owner's leases with its record, to the same expiry, and a lease taken by another has a later token; so one field
-- is read for the batch rather than a key per job. A write taken of a job the fleet has paused answers 2: the
-- field `paused` lists their names (a JSON array), read once per batch. The records of runs ride with the writes:
-- one script for both.

--- @include "chunked.lua"
--- @include "record.lua"
local writes, keep = tonumber(ARGV[2]), tonumber(ARGV[3])
local fields, values, tokens, lasts = 3, 3 + writes, 3 + 2 * writes, 3 + 3 * writes
local grids = lasts + writes + 1
record(keep, grids + 1 + 3 * tonumber(ARGV[grids]))
if writes == 0 then return {} end
local time = redis.call('TIME')
local nowMs = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local member = redis.call('HGET', KEYS[1], 'member:' .. ARGV[1])
local live = member and tonumber(string.sub(member, 1, string.find(member, '\t', 1, true) - 1)) > nowMs
local held = chunked('HMGET', KEYS[1], ARGV, fields + 1, fields + writes)
local taken = {}
for i = 1, writes do
  local stored, token, ok = held[i], ARGV[tokens + i], false
  -- The stored token is the field up to its first space, or all of it before the job has a schedule.
  if live and stored and string.find(stored, token, 1, true) == 1 then
    local after = string.byte(stored, #token + 1)
    if after == nil then ok = true
    elseif after == 32 then
      local last = string.sub(stored, #token + 2, string.find(stored, ' ', #token + 2, true) - 1)
      ok = tonumber(ARGV[lasts + i]) >= tonumber(last)
    end
  end
  taken[i] = ok and 1 or 0
end
local paused = redis.call('HGET', KEYS[1], 'paused')
if paused and paused ~= '[]' then
  local names = {}
  for _, name in ipairs(cjson.decode(paused)) do names[name] = true end
  for i = 1, writes do
    if taken[i] == 1 and names[string.sub(ARGV[fields + i], 10)] then taken[i] = 2 end
  end
end
local stored, n = {}, 0
for i = 1, writes do
  if taken[i] ~= 0 then stored[n + 1], stored[n + 2], n = ARGV[fields + i], ARGV[values + i], n + 2 end
end
for at = grids + 1, grids + 3 * tonumber(ARGV[grids]), 3 do
  if taken[tonumber(ARGV[at])] ~= 0 then stored[n + 1], stored[n + 2], n = ARGV[at + 1], ARGV[at + 2], n + 2 end
end
chunked('HSET', KEYS[1], stored)
return taken
