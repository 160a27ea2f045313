-- record(keep, at) records runs in their jobs' lists one by one, those that no tail takes (RunTail): the runs a
-- replica records of a job whose lease it no longer holds (a run that ended after its lease was lost), and those
-- of a coordinator that holds no lease or whose client sends no plain commands. From ARGV[at] on: the number of
-- records that replace a start, of new records, of jobs that failed and of jobs that succeeded, then each
-- section. A record that replaces its run's start (its JSON and how long its mark is, the start that names the
-- run; its list is KEYS[1 + i]) replaces it at the end of the list, or among the 32 latest, or is appended; these
-- come first, before the runs that started since push the start further back. A new record (its JSON; its list
-- follows those of the replacing ones) is appended to its list, which is cut back to the latest `keep` once it
-- holds `keep / 8` (8 at least) more, so that most records cost one command; readers read the latest `keep`. A
-- job that failed (its name, its failures, and when the success before them in this batch ended, or empty) sets
-- `failed:<name>` of the hash to the failures since the success `ok:<name>` tells and that success's time (`2
-- 1733000000000`). The jobs that succeeded come as field and value pairs (`ok:<name>`, when the last success
-- ended), written as they are.

local function record(keep, at)
  local replacing, fresh, failing, succeeded = tonumber(ARGV[at]), tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2]),
    tonumber(ARGV[at + 3])
  local most = keep + math.max(8, math.floor(keep / 8))
  at = at + 4
  for i = 1, replacing do
    local key, json, mark = KEYS[1 + i], ARGV[at], tonumber(ARGV[at + 1])
    local run, replaced = string.sub(json, 1, mark), false
    local latest = redis.call('LINDEX', key, -1)
    if latest and string.sub(latest, 1, mark) == run then
      redis.call('LSET', key, -1, json)
      replaced = true
    else
      local newest = redis.call('LRANGE', key, -32, -1)
      for j = #newest - 1, 1, -1 do
        if string.sub(newest[j], 1, mark) == run then
          redis.call('LSET', key, j - 1 - #newest, json)
          replaced = true
          break
        end
      end
    end
    if not replaced and redis.call('RPUSH', key, json) > most then redis.call('LTRIM', key, -keep, -1) end
    at = at + 2
  end
  for i = 1, fresh do
    local key = KEYS[1 + replacing + i]
    if redis.call('RPUSH', key, ARGV[at + i - 1]) > most then redis.call('LTRIM', key, -keep, -1) end
  end
  at = at + fresh
  for _ = 1, failing do
    local name, count, since = ARGV[at], tonumber(ARGV[at + 1]), ARGV[at + 2]
    if since == '' then
      local stored = redis.call('HMGET', KEYS[1], 'ok:' .. name, 'failed:' .. name)
      since = stored[1] or ''
      local space = stored[2] and string.find(stored[2], ' ', 1, true)
      if space and string.sub(stored[2], space + 1) == since then
        count = count + tonumber(string.sub(stored[2], 1, space - 1))
      end
    end
    redis.call('HSET', KEYS[1], 'failed:' .. name, count .. ' ' .. since)
    at = at + 3
  end
  local last = at + 2 * succeeded - 1
  for from = at, last, 960 do redis.call('HSET', KEYS[1], unpack(ARGV, from, math.min(from + 959, last))) end
end
