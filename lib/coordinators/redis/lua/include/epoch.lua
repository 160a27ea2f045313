-- The fleet's epoch, the field `epoch` of the hash: moved on by every acquire, anyone's, to the larger of the last
-- one plus one and Redis's clock in microseconds (so that it never comes back to a value it had, even after Redis
-- lost it). A heartbeat tells its replica the epoch, with the leases it renewed and took: while the epoch is still
-- that one, no lease has changed hands since, and the replica's writes to its own jobs need no check per job
-- (write-held-1.lua). epoch(hash, floor, moved) moves it on (if `moved`), sets it if missing, and returns it.

local function epoch(hash, floor, moved)
  local stored = redis.call('HGET', hash, 'epoch')
  if stored and not moved then return stored end
  stored = string.format('%d', math.max(tonumber(stored or '0') + 1, floor))
  redis.call('HSET', hash, 'epoch', stored)
  return stored
end
