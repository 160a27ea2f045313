-- KEYS: the hash, then the lease keys of the renewals; ARGV: owner, replica, jobs, leaseMs, the fleet's epoch as
-- the owner's last heartbeat read it. The heartbeat of a replica that takes no lease, while the epoch is still
-- that one: no lease has changed hands since that heartbeat renewed or took them (epoch.lua), so each is still the
-- owner's, with the same token, unless it expired: it is renewed if its holder is still the owner, with no read of
-- its token (heartbeat-n.lua reads both, two arguments per lease). Answers as heartbeat-n.lua does; or 0, having
-- changed nothing, when the epoch has moved on or a trigger waits for a holder (then heartbeat-n.lua runs
-- instead).

--- @include "members.lua"
local epoch = redis.call('HGET', KEYS[1], 'epoch')
if epoch ~= ARGV[5] or redis.call('HEXISTS', KEYS[1], 'triggers') == 1 then return 0 end
local time = redis.call('TIME')
local live = beat(tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000))
local renewed, leaseMs = {}, tonumber(ARGV[4])
for i = 2, #KEYS do
  renewed[i - 1] = redis.call('GET', KEYS[i]) == ARGV[1] and redis.call('PEXPIRE', KEYS[i], leaseMs) or 0
end
return {live, renewed, {}, redis.call('HGET', KEYS[1], 'paused') or '[]', '', epoch, redis.call('HGET', KEYS[1], 'fleet') or '',
  redis.call('HGET', KEYS[1], 'schedules') or '0'}
