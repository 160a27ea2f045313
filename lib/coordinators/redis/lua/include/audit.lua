-- audit(hash, name, record, keep) prepends an operation (its JSON record) to the job's audit trail, the field
-- `audit:<name>` of the hash: JSON records, newest first, one per line, the latest `keep` kept.

local function audit(hash, name, record, keep)
  local trail = record .. '\n' .. (redis.call('HGET', hash, 'audit:' .. name) or '')
  local at = 0
  for _ = 1, keep do
    at = string.find(trail, '\n', at + 1, true)
    if not at then break end
  end
  if at then trail = string.sub(trail, 1, at) end
  redis.call('HSET', hash, 'audit:' .. name, trail)
end
