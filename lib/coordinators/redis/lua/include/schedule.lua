-- A job's schedule is the field `schedule:<name>` of the hash: the fencing token of the lease it was last taken
-- under, then, once the job has a schedule, its last and next slots (`<token> <last> <next>`, and after them the
-- count of slots claimed for a job with maxRuns, which the scripts keep as part of `next`); its grid is the
-- field `grid:<name>`, written only when it changes. A claim reads and writes that one field, and checks the
-- token in it: each acquire stamps the field with its new token. scheduleOf(hash, name) returns the field's name
-- and the token, last and next it holds (nil when missing); stamp(hash, name, token) writes the new token into it,
-- keeping the slots, and returns last and next.

local function scheduleOf(hash, name)
  local field = 'schedule:' .. name
  local stored = redis.call('HGET', hash, field)
  if not stored then return field end
  local first = string.find(stored, ' ', 1, true)
  if not first then return field, stored end
  local second = string.find(stored, ' ', first + 1, true)
  return field, string.sub(stored, 1, first - 1), string.sub(stored, first + 1, second - 1), string.sub(stored, second + 1)
end
local function stamp(hash, name, token)
  local field, _, last, next = scheduleOf(hash, name)
  redis.call('HSET', hash, field, last and (token .. ' ' .. last .. ' ' .. next) or token)
  return last, next
end
