import { createHash } from 'node:crypto';
import type {
  PeriodicCoordinator,
  PeriodicFleetMember,
  PeriodicFleetRead,
  PeriodicFleetSchedule,
  PeriodicHeartbeat,
  PeriodicHeartbeatReply,
  PeriodicLeaseHeld,
  PeriodicOperation,
  PeriodicRunEntry,
  PeriodicScheduleWrite,
  PeriodicScheduleWritten,
  PeriodicTriggerAnswer,
  PeriodicTriggerRequest,
  PeriodicTriggerState,
} from '../../scheduler/coordinator-port.js';
import { describeValue, isError } from '../../scheduler/errors.js';
import { HISTORY_DEFAULTS, newestFirst, outcomeOf } from '../../scheduler/history.js';
import { checkedOptions, type OptionRule } from '../../scheduler/rules.js';
import {
  integerReply,
  LEASE_MS,
  operationOf,
  RECORD_VERSION,
  RUN_ARRAY_VERSION,
  RUN_FIELDS,
  triggerAnswerOf,
  triggerOf,
} from '../replies.js';
import { KEY_KINDS, KEY_SEPARATOR, keyOf, LUA_KEY_OF } from './keys.js';
import { historyOf, RunTail, SEGMENT } from './tail.js';

/** What the coordinator needs of its client; an ioredis `Redis` or `Cluster` has it. */
export interface RedisClient {
  eval(script: string, numkeys: number, ...args: (string | number)[]): Promise<unknown>;
  evalsha(sha1: string, numkeys: number, ...args: (string | number)[]): Promise<unknown>;
  /**
   * Any command: the holder of a job's lease sends the tail of its history with it (RunTail). A client without it
   * records every run in a script of its own, which costs Redis about three times as much.
   */
  call?(command: string, ...args: (string | number)[]): Promise<unknown>;
}

/** Options of {@link RedisCoordinator}. */
export interface RedisCoordinatorOptions {
  /** The connection, e.g. `new Redis(process.env.REDIS_URL)` from ioredis; the application closes it. */
  client: RedisClient;
  /**
   * Begins every key of the coordinator, before a line feed (it cannot have one itself): `<keyPrefix>\nh` is the
   * hash of the jobs' fencing tokens and schedules and of the fleet's members, `<keyPrefix>\nl<name>` a job's lease
   * (docs/replicas.md, "Keys in Redis"). Give each application sharing a Redis its own. With Redis Cluster, put a
   * hash tag in it: `'{periodic}:'`.
   * @default 'periodic:'
   */
  keyPrefix?: string;
  /** How long a lease lasts unless renewed, in integer milliseconds, 100 to 86,400,000 (a day). @default 10_000 */
  leaseMs?: number;
}

/**
 * A job's schedule is the field \`schedule:<name>\` of the hash: the fencing token of the lease it was last taken
 * under, then, once the job has a schedule, its last and next slots (\`<token> <last> <next>\`); its grid is the
 * field \`grid:<name>\`, written only when it changes. A claim reads and writes that one field, and checks the
 * token in it: each acquire stamps the field with its new token. SCHEDULE_OF(hash, name) returns the field's name
 * and the token, last and next it holds (nil when missing); STAMP(hash, name, token) writes the new token into it,
 * keeping the slots, and returns last and next.
 */
const SCHEDULE = `local function scheduleOf(hash, name)
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
`;

/**
 * The fleet's epoch, the field \`epoch\` of the hash: moved on by every acquire, anyone's, to the larger of the last
 * one plus one and Redis's clock in microseconds (so that it never comes back to a value it had, even after
 * Redis lost it). A heartbeat tells its replica the epoch, with the leases it renewed and took: while the epoch
 * is still that one, no lease has changed hands since, and the replica's writes to its own jobs need no check
 * per job (WRITE_HELD). EPOCH(hash, floor, moved) moves it on (if \`moved\`), sets it if missing, and returns it.
 */
const EPOCH = `local function epoch(hash, floor, moved)
  local stored = redis.call('HGET', hash, 'epoch')
  if stored and not moved then return stored end
  stored = string.format('%d', math.max(tonumber(stored or '0') + 1, floor))
  redis.call('HSET', hash, 'epoch', stored)
  return stored
end
`;

/**
 * HISTORY(hash, name) reads the tail of job \`name\`'s history as its latest holder (the field \`holder:<name>\`) left
 * it (RunTail), or empty; its segments, oldest first; and where they are.
 */
const HISTORY = `${LUA_KEY_OF}
local function history(hash, name)
  local holder = redis.call('HGET', hash, 'holder:' .. name)
  local tails = holder and keyOf(hash, '${KEY_KINDS.tails}', holder)
  local tail = tails and redis.call('HGET', tails, 't:' .. name)
  if not tail then return '', {} end
  local segments, slots = string.match(tail, '^%d+ %d+ (%d+) (%d+)')
  local found = {}
  segments, slots = tonumber(segments or '0'), tonumber(slots or '1')
  for n = math.max(0, segments - slots), segments - 1 do
    local segment = redis.call('HGET', tails, 's' .. (n % slots) .. ':' .. name)
    if segment then found[#found + 1] = segment end
  end
  return tail, found, tails
end
`;

/**
 * HAND_OVER(hash, name, owner): \`owner\` takes job \`name\`, whose latest holder is the field \`holder:<name>\`. The
 * history that the holder before left, its segments and its tail (RunTail), goes to the end of the job's list, and
 * the tail's success and failures to the fields \`ok:<name>\` and \`failed:<name>\` (as RECORD keeps them), so that the
 * new holder starts a history of its own. A tail that \`owner\` left of an earlier holding, written after that
 * holding was handed over (a write delayed past its lease), is deleted: its runs and counts were moved then. The
 * list is cut back to the latest runs of \`keep\` at least, \`keep\` as the tail's ring tells it (RunTail): an
 * element holds a run, or a segment or tail of them.
 */
const HAND_OVER = `${HISTORY}
local function forget(tails, name, slots)
  local fields = {'t:' .. name}
  for i = 0, slots - 1 do fields[#fields + 1] = 's' .. i .. ':' .. name end
  redis.call('HDEL', tails, unpack(fields))
end
local function trim(list, keep)
  local elements, runs = redis.call('LRANGE', list, -keep, -1), 0
  for i = #elements, 1, -1 do
    local element = elements[i]
    if string.sub(element, 1, 2) == 'S\\n' then
      runs = runs + select(2, string.gsub(element, '\\n', '')) - 1
    else
      runs = runs + 1
    end
    if runs >= keep then return redis.call('LTRIM', list, i - #elements - 1, -1) end
  end
end
local function handOver(hash, name, owner)
  local tail, segments, tails = history(hash, name)
  redis.call('HSET', hash, 'holder:' .. name, owner)
  local stale = keyOf(hash, '${KEY_KINDS.tails}', owner)
  if stale ~= tails then
    local left = redis.call('HGET', stale, 't:' .. name)
    if left then forget(stale, name, tonumber(string.match(left, '^%d+ %d+ %d+ (%d+)') or '0')) end
  end
  if tail == '' then return end
  local list = keyOf(hash, '${KEY_KINDS.runs}', name)
  for _, segment in ipairs(segments) do redis.call('RPUSH', list, segment) end
  local okAt, failures, slots, records = string.match(tail, '^(%d+) (%d+) %d+ (%d+)\\n?(.*)$')
  slots = tonumber(slots or '1')
  if records and records ~= '' then redis.call('RPUSH', list, 'S\\n' .. records) end
  forget(tails, name, slots)
  trim(list, ${SEGMENT} * (slots - 1))
  if not okAt then return end
  local stored = redis.call('HMGET', hash, 'ok:' .. name, 'failed:' .. name)
  local since, count = stored[1] or '', tonumber(failures)
  if okAt ~= '0' and tonumber(okAt) > tonumber(since == '' and '0' or since) then
    since = okAt
    redis.call('HSET', hash, 'ok:' .. name, okAt)
  else
    local space = stored[2] and string.find(stored[2], ' ', 1, true)
    if space and string.sub(stored[2], space + 1) == since then
      count = count + tonumber(string.sub(stored[2], 1, space - 1))
    end
  end
  if count > 0 or stored[2] then redis.call('HSET', hash, 'failed:' .. name, count .. ' ' .. since) end
end
`;

/**
 * KEYS: lease key, the hash of the jobs' counters and schedules; ARGV: owner, leaseMs, job name. Takes the lease unless it is held; on
 * success the job's fencing token becomes the larger of the last one plus one and Redis's clock in
 * microseconds, so that it grows even when Redis lost the counters (a restart without persistence, FLUSHALL,
 * a failover), and the fleet's epoch moves on. Returns the token, or 0 when the lease is held. Lua numbers are
 * doubles: the token is stored through string.format('%d'), exact up to 2^53.
 */
const ACQUIRE = `${SCHEDULE}${EPOCH}${HAND_OVER}
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 0
end
local time = redis.call('TIME')
local floor = tonumber(time[1]) * 1000000 + tonumber(time[2])
local field = 'token:' .. ARGV[3]
local token = string.format('%d', math.max(tonumber(redis.call('HGET', KEYS[2], field) or '0') + 1, floor))
redis.call('HSET', KEYS[2], field, token)
stamp(KEYS[2], ARGV[3], token)
epoch(KEYS[2], floor, true)
handOver(KEYS[2], ARGV[3], ARGV[1])
return tonumber(token)`;

/** KEYS: lease key; ARGV: owner, leaseMs. Extends the lease if the owner holds it still: 1, else 0. */
const RENEW = `if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0`;

/** KEYS: lease key; ARGV: owner. Deletes the lease if the owner holds it still: 1, else 0. */
const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`;

/**
 * KEYS: lease key, the hash; ARGV: owner, fencing token, job name, last, next, grid. Stores the job's schedule
 * if the owner holds the lease with that token and \`last\` does not go back: 1, else 0.
 */
const WRITE_SCHEDULE = `${SCHEDULE}
local field, token, last = scheduleOf(KEYS[2], ARGV[3])
if redis.call('GET', KEYS[1]) ~= ARGV[1] or token ~= ARGV[2] or tonumber(ARGV[4]) < tonumber(last or '0') then
  return 0
end
redis.call('HSET', KEYS[2], field, ARGV[2] .. ' ' .. ARGV[4] .. ' ' .. ARGV[5], 'grid:' .. ARGV[3], ARGV[6])
return 1`;

/** KEYS: the hash; ARGV: fields. Their values (false for a missing one). */
const READ_FIELDS = `return redis.call('HMGET', KEYS[1], unpack(ARGV))`;

/** KEYS: the hash; ARGV: job name. The job's schedule as [last, next, grid], each false if missing. */
const READ_SCHEDULE = `${SCHEDULE}
local _, _, last, next = scheduleOf(KEYS[1], ARGV[1])
return {last or false, next or false, redis.call('HGET', KEYS[1], 'grid:' .. ARGV[1])}`;

/**
 * The members of the fleet, kept in the hash: the field `members` lists their owners, one per line, and the field
 * `member:<owner>` holds each one's record (its expiry in ms on Redis's clock, a tab, its name, a tab, its jobs).
 * ARGV[1] is the owner of the replica that runs the script. MEMBERS(nowMs) forgets the expired records and
 * returns the live members as owner, name-and-jobs pairs; BEAT(nowMs) writes the replica's record first (its name
 * ARGV[2], its jobs ARGV[3], until leaseMs ARGV[4] from now), and returns them too.
 */
const MEMBERS = `local function members(nowMs, record)
  local list = redis.call('HGET', KEYS[1], 'members') or ''
  local live, found, seen = {}, {}, false
  for other in string.gmatch(list, '[^\\n]+') do
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
  local joined = table.concat(live, '\\n')
  if joined ~= list then redis.call('HSET', KEYS[1], 'members', joined) end
  return found
end
local function beat(nowMs)
  local record = string.format('%d', nowMs + tonumber(ARGV[4])) .. '\t' .. ARGV[2] .. '\t' .. ARGV[3]
  redis.call('HSET', KEYS[1], 'member:' .. ARGV[1], record)
  return members(nowMs, record)
end
`;

/**
 * CHUNKED(command, key, items, first, last) calls the command with the key (none if nil) and items `first` to
 * `last` (all of them by default), in steps of at most 960 items (Lua's unpack has a limit), and returns the
 * replies of the steps one after the other: a batch reads or writes the fields and keys of all its jobs in a few
 * calls, rather than a few per job. `items` may be ARGV itself, whose arguments then go to the command as they
 * came, with no table made of them.
 */
const CHUNKED = `local function chunked(command, key, items, first, last)
  first, last = first or 1, last or #items
  local function call(from, to)
    if key then return redis.call(command, key, unpack(items, from, to)) end
    return redis.call(command, unpack(items, from, to))
  end
  if last - first < 960 then return last < first and {} or call(first, last) end
  local replies = {}
  for from = first, last, 960 do
    local reply = call(from, math.min(from + 959, last))
    if type(reply) == 'table' then
      for i = 1, #reply do replies[#replies + 1] = reply[i] end
    end
  end
  return replies
end
`;

/**
 * KEYS: the hash, then the lease keys of the renewals and of the leases to acquire. ARGV: owner, replica, jobs,
 * leaseMs, the number of renewals, their tokens, then the job names in the order of KEYS. Writes the member's
 * record and forgets the expired ones; renews each lease the owner holds with that token; takes each lease to
 * acquire that is free, as ACQUIRE does. Returns the live members as owner, record pairs; a 1 or 0 per renewal;
 * and per lease taken or not, its token (0 when not taken) and its schedule's last, next and grid (empty when
 * none); the names of the jobs the fleet has paused, as JSON; the triggers carried; the fleet's epoch once the
 * leases were taken; and the name of the fleet's records, the field \`fleet\` of the hash, written as the owner and
 * the time when the hash has none (it went with the records: \`PeriodicHeartbeatReply.fleet\`). A lease taken is
 * handed over (HAND_OVER).
 */
const HEARTBEAT = `${MEMBERS}${CHUNKED}${SCHEDULE}${EPOCH}${HAND_OVER}
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
return {live, renewed, acquired, redis.call('HGET', KEYS[1], 'paused') or '[]', table.concat(carried, '\\n'), now, fleet}`;

/**
 * KEYS: the hash, then the lease keys of the renewals; ARGV: owner, replica, jobs, leaseMs, the fleet's epoch as the
 * owner's last heartbeat read it. The heartbeat of a replica that takes no lease, while the epoch is still that
 * one: no lease has changed hands since that heartbeat renewed or took them (EPOCH), so each is still the owner's,
 * with the same token, unless it expired: it is renewed if its holder is still the owner, with no read of its
 * token (HEARTBEAT reads both, two arguments per lease). Answers as
 * HEARTBEAT does; or 0, having changed nothing, when the epoch has moved on or a trigger waits for a holder (then
 * HEARTBEAT runs instead).
 */
const RENEW_HELD = `${MEMBERS}
local epoch = redis.call('HGET', KEYS[1], 'epoch')
if epoch ~= ARGV[5] or redis.call('HEXISTS', KEYS[1], 'triggers') == 1 then return 0 end
local time = redis.call('TIME')
local live = beat(tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000))
local renewed, leaseMs = {}, tonumber(ARGV[4])
for i = 2, #KEYS do
  renewed[i - 1] = redis.call('GET', KEYS[i]) == ARGV[1] and redis.call('PEXPIRE', KEYS[i], leaseMs) or 0
end
return {live, renewed, {}, redis.call('HGET', KEYS[1], 'paused') or '[]', '', epoch, redis.call('HGET', KEYS[1], 'fleet') or ''}`;

/**
 * KEYS: the hash; ARGV: job name, the trigger as JSON. Leaves the trigger for the holder: a line of the field
 * `trigger:<name>`, and the name in the field `triggers` (a JSON array), which heartbeats look at.
 */
const REQUEST_TRIGGER = `local name = ARGV[1]
local field = 'trigger:' .. name
local requests = redis.call('HGET', KEYS[1], field)
redis.call('HSET', KEYS[1], field, requests and (requests .. '\\n' .. ARGV[2]) or ARGV[2])
local names = cjson.decode(redis.call('HGET', KEYS[1], 'triggers') or '[]')
for _, other in ipairs(names) do
  if other == name then return 1 end
end
names[#names + 1] = name
redis.call('HSET', KEYS[1], 'triggers', cjson.encode(names))
return 1`;

/**
 * KEYS: the hash; ARGV: job name, trigger id, the start of its JSON (`{"id":…`), withdraw (1 or 0). The answer
 * (`answer:<id>`, deleted as it is read), or `pending` while the trigger is still left for the holder (with
 * withdraw, it is taken away: `withdrawn`), or `taken`.
 */
const READ_TRIGGER = `local answer = redis.call('HGET', KEYS[1], 'answer:' .. ARGV[2])
if answer then
  redis.call('HDEL', KEYS[1], 'answer:' .. ARGV[2])
  return {'answer', answer}
end
local field, mark = 'trigger:' .. ARGV[1], ARGV[3]
local kept, found = {}, false
for line in string.gmatch(redis.call('HGET', KEYS[1], field) or '', '[^\\n]+') do
  if string.sub(line, 1, #mark) == mark then found = true else kept[#kept + 1] = line end
end
if not found then return {'taken'} end
if ARGV[4] ~= '1' then return {'pending'} end
if #kept > 0 then
  redis.call('HSET', KEYS[1], field, table.concat(kept, '\\n'))
  return {'withdrawn'}
end
redis.call('HDEL', KEYS[1], field)
local names = {}
for _, other in ipairs(cjson.decode(redis.call('HGET', KEYS[1], 'triggers') or '[]')) do
  if other ~= ARGV[1] then names[#names + 1] = other end
end
if #names == 0 then redis.call('HDEL', KEYS[1], 'triggers')
else redis.call('HSET', KEYS[1], 'triggers', cjson.encode(names)) end
return {'withdrawn'}`;

/** How many runs in flight a coordinator remembers having recorded at their start. */
const OPEN_KEPT = 10_000;

/** KEYS: the hash; ARGV: field, value. Sets the field. */
const SET_FIELD = `return redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])`;

/**
 * RECORD(keep, at) records runs in their jobs' lists one by one, those that no tail takes (RunTail): the runs a
 * replica records of a job whose lease it no longer holds (a run that ended after its lease was lost), and those
 * of a coordinator that holds no lease or whose client sends no plain commands. From ARGV[at] on: the number of
 * records that replace a start, of new records, of jobs that failed and of jobs that succeeded, then each
 * section. A record that replaces its run's start (its JSON and how long its mark is, the start that names the
 * run; its list is KEYS[1 + i]) replaces it at the end of the list, or among the 32 latest, or is appended; these
 * come first, before the runs that started since push the start further back. A new record (its JSON; its list
 * follows those of the replacing ones) is appended to its list, which is cut back to the latest `keep` once it
 * holds `keep / 8` (8 at least) more, so that most records cost one command; readers read the latest `keep`. A
 * job that failed (its name, its failures, and when the success before them in this batch ended, or empty) sets
 * `failed:<name>` of the hash to the failures since the success `ok:<name>` tells and that success's time (`2
 * 1733000000000`). The jobs that succeeded come as field and value pairs (`ok:<name>`, when the last success
 * ended), written as they are.
 */
const RECORD = `local function record(keep, at)
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
`;

/**
 * KEYS: the hash, then the history lists of the runs to record. ARGV: owner, the number of writes, keep; then, per
 * write, its schedule field (`schedule:<name>`); per write, the field's new value (`<token> <last> <next>`); per
 * write, its token; per write, its last slot; the number of grids written, and per grid the index of its write,
 * `grid:<name>` and the grid (a job's grid goes again only under a new token); then the runs to record (RECORD).
 * A claim reads one field and writes it, and the arguments come ready-made, so that Lua makes one string of its
 * own per claim (the last slot stored): Lua's strings cost Redis more than its commands do. Writes each schedule
 * as WRITE_SCHEDULE does, a 1 or 0 for each, but for the check that the owner still holds the lease: it holds it
 * while its member record lives and the token is the job's latest. A heartbeat renews all the owner's leases with
 * its record, to the same expiry, and a lease taken by another has a later token; so one field is read for the
 * batch rather than a key per job. A write taken of a job the fleet has paused answers 2: the field `paused`
 * lists their names (a JSON array), read once per batch. The records of runs ride with the writes: one script for
 * both.
 */
const WRITE_SCHEDULES = `${CHUNKED}${RECORD}
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
return taken`;

/**
 * KEYS: the hash. ARGV: owner, the fleet's epoch as the owner's last heartbeat read it, the number of claims, then
 * field and value pairs: the claims' schedule fields (`schedule:<name>`, `<token> <last> <next>`), then grids.
 * Writes them as they are, if the owner's member record lives and the epoch is still that one: each of these jobs'
 * leases was renewed or taken by that heartbeat, and none has changed hands since (EPOCH), so a claim needs no
 * read of its job's field. Returns per claim 1, or 2 for a job the fleet has paused; or 0, having written nothing,
 * when the epoch has moved on or the member record has expired: the owner's writes are then checked one by one
 * (WRITE_SCHEDULES) until its next heartbeat. This is the common case, a fleet whose leases stay where they are,
 * and it costs Redis two arguments and a field per claim, where the checked write costs four, a read and a field.
 */
const WRITE_HELD = `${CHUNKED}
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
return taken`;

/**
 * KEYS: the hash, then per job its lease key and its history list; ARGV: the job names. Per job: the lease's
 * holder (empty if none), its time to live in ms, the field token of the hash, the last and next slots of its
 * schedule field, the fields grid, pause, ok and failed (each empty when missing), the two newest elements of
 * its list (a record, or a segment of them: the list is in the order runs were handed over or recorded, a record
 * replaced in place when its run ends), and the tail of its history and its latest segment (HISTORY); first of
 * all, Redis's clock in ms.
 */
const READ_FLEET = `${SCHEDULE}${HISTORY}
local time = redis.call('TIME')
local reply = {string.format('%d', tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000))}
for i = 1, #ARGV do
  local name, lease = ARGV[i], KEYS[2 * i]
  reply[#reply + 1] = redis.call('GET', lease) or ''
  reply[#reply + 1] = redis.call('PTTL', lease)
  local fields = redis.call('HMGET', KEYS[1], 'token:' .. name, 'grid:' .. name, 'pause:' .. name, 'ok:' .. name,
    'failed:' .. name)
  local _, _, last, next = scheduleOf(KEYS[1], name)
  reply[#reply + 1] = fields[1] or ''
  reply[#reply + 1] = last or ''
  reply[#reply + 1] = next or ''
  for j = 2, 5 do reply[#reply + 1] = fields[j] or '' end
  reply[#reply + 1] = redis.call('LRANGE', KEYS[2 * i + 1], -2, -1)
  local tail, segments = history(KEYS[1], name)
  reply[#reply + 1] = tail
  reply[#reply + 1] = segments[#segments] or ''
end
return reply`;

/**
 * KEYS: the hash, job \`name\`'s list; ARGV: the job's name, how many elements of the list to read. The tail of the
 * job's history and its segments (HISTORY), and the latest elements of its list.
 */
const READ_HISTORY = `${HISTORY}
local tail, segments = history(KEYS[1], ARGV[1])
return {tail, segments, redis.call('LRANGE', KEYS[2], -tonumber(ARGV[2]), -1)}`;

/**
 * KEYS: the hash; ARGV: job name, action, the operation as JSON, keep. Prepends the operation to the job's audit
 * trail, the field \`audit:<name>\` (JSON records, newest first, one per line, the latest \`keep\` kept); a pause
 * is the field \`pause:<name>\` and the name in \`paused\` until a resume deletes both.
 */
const OPERATE = `local name, action, record, keep = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local trail = record .. '\\n' .. (redis.call('HGET', KEYS[1], 'audit:' .. name) or '')
local at = 0
for _ = 1, keep do
  at = string.find(trail, '\\n', at + 1, true)
  if not at then break end
end
if at then trail = string.sub(trail, 1, at) end
redis.call('HSET', KEYS[1], 'audit:' .. name, trail)
if action == 'trigger' then return 1 end
local kept = {}
for _, other in ipairs(cjson.decode(redis.call('HGET', KEYS[1], 'paused') or '[]')) do
  if other ~= name then kept[#kept + 1] = other end
end
if action == 'pause' then
  kept[#kept + 1] = name
  redis.call('HSET', KEYS[1], 'pause:' .. name, record)
else
  redis.call('HDEL', KEYS[1], 'pause:' .. name)
end
if #kept == 0 then redis.call('HDEL', KEYS[1], 'paused')
else redis.call('HSET', KEYS[1], 'paused', cjson.encode(kept)) end
return 1`;

/**
 * KEYS: the hash, then the lease keys; ARGV: owner, leave (1 or 0), then per lease its job name and token.
 * Deletes each lease the owner holds with that token; with leave, forgets the owner's member record.
 */
const RELEASE_ALL = `${MEMBERS}
for i = 1, #KEYS - 1 do
  local name, token = ARGV[1 + 2 * i], ARGV[2 + 2 * i]
  if redis.call('GET', KEYS[1 + i]) == ARGV[1] and redis.call('HGET', KEYS[1], 'token:' .. name) == token then
    redis.call('DEL', KEYS[1 + i])
  end
end
if ARGV[2] == '1' then
  redis.call('HDEL', KEYS[1], 'member:' .. ARGV[1])
  local time = redis.call('TIME')
  members(tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000), nil)
end
return 1`;

const RULES = {
  client: {
    accepts: (value) => {
      const client = value as Partial<RedisClient> | null | undefined;
      return typeof client?.eval === 'function' && typeof client?.evalsha === 'function';
    },
    expected: 'an ioredis client, such as new Redis(process.env.REDIS_URL)',
    required: true,
  },
  keyPrefix: {
    accepts: (value) => typeof value === 'string' && value !== '' && !value.includes(KEY_SEPARATOR),
    expected: "a non-empty string without a line feed, such as 'periodic:'",
    because:
      'a line feed ends the prefix in every key the coordinator makes, so that no two prefixes share a key',
  },
  leaseMs: LEASE_MS,
} satisfies Record<keyof RedisCoordinatorOptions, OptionRule>;

/**
 * Shares the leases of `exclusive` jobs between the replicas of an application through Redis. The lease of
 * job `name` is the key `<keyPrefix>\nl<name>`; its fencing token and schedule are the fields `token:<name>`,
 * `schedule:<name>` and `grid:<name>` of the hash `<keyPrefix>\nh`, which also keeps the fleet's members (the keys
 * are one-to-one in the prefix and the name: keys.ts). The
 * coordinator sends Lua scripts through the client it is given and loads no Redis library of its own. Replies are parsed whatever the client's options (`stringNumbers`, its own `keyPrefix`).
 */
export class RedisCoordinator implements PeriodicCoordinator {
  /** Begins every key of the coordinator, before a line feed. */
  readonly keyPrefix: string;
  /** How long a lease lasts unless renewed, in ms. */
  readonly leaseMs: number;
  /** The key of the fleet's hash, `<keyPrefix>\nh` (docs/replicas.md, "Keys in Redis"). */
  readonly #fleet: string;
  readonly #client: RedisClient;
  readonly #acquire;
  readonly #renew;
  readonly #release;
  readonly #readSchedule;
  readonly #writeSchedule;
  readonly #heartbeat = this.#script(HEARTBEAT);
  readonly #renewHeld = this.#script(RENEW_HELD);
  readonly #writeSchedules = this.#script(WRITE_SCHEDULES);
  readonly #writeHeld = this.#script(WRITE_HELD);
  readonly #releaseAll = this.#script(RELEASE_ALL);
  readonly #operate = this.#script(OPERATE);
  readonly #readFields = this.#script(READ_FIELDS);
  readonly #readHistory = this.#script(READ_HISTORY);
  readonly #readFleet = this.#script(READ_FLEET);
  readonly #requestTrigger = this.#script(REQUEST_TRIGGER);
  readonly #readTrigger = this.#script(READ_TRIGGER);
  readonly #setField = this.#script(SET_FIELD);
  /** Records of runs to send, with the writes of this turn if there are any (one script for both). */
  #records: Records | undefined;
  /**
   * The leases this coordinator's owners hold, by job, as their latest heartbeats renewed or took them: their
   * writes go unchecked (WRITE_HELD), and their runs to the tails of their histories (RunTail).
   */
  readonly #holdings = new Map<string, Holding>();
  /** The fleet's epoch (EPOCH) as each owner's latest heartbeat read it, if all its steps read the same. */
  readonly #epochs = new Map<string, string>();
  /**
   * The runs recorded at their start, whose record is replaced when they end; at most OPEN_KEPT, the oldest
   * forgotten first (a run whose end was never sent, as when records were shed, would stay for ever): the end of
   * a run forgotten here is pushed, as is the end of one whose start is no longer among the 32 newest.
   */
  readonly #open = new Set<string>();
  /** How many runs per job the records keep (the latest `keep` given): what they are cut back to, and what a history read without `keep` reads. */
  #keep = HISTORY_DEFAULTS.keep;
  /**
   * The grid each job's schedule has in Redis, as this coordinator last wrote it under a fencing token: a write
   * under the same token leaves it as it is (only the holder writes, and a job's grid rarely changes), and saves
   * Redis a field per claim.
   */
  readonly #grids = new Map<string, { fencingToken: number; grid: string }>();

  constructor(options: RedisCoordinatorOptions) {
    const where = 'new RedisCoordinator()';
    const given = checkedOptions(where, options, RULES, '{ client: new Redis(process.env.REDIS_URL) }');
    const { client, keyPrefix = 'periodic:', leaseMs = 10_000 } = given as unknown as RedisCoordinatorOptions;
    this.#client = client;
    this.keyPrefix = keyPrefix;
    this.#fleet = keyOf(keyPrefix, 'fleet');
    this.leaseMs = leaseMs;
    this.#acquire = this.#script(ACQUIRE);
    this.#renew = this.#script(RENEW);
    this.#release = this.#script(RELEASE);
    this.#readSchedule = this.#script(READ_SCHEDULE);
    this.#writeSchedule = this.#script(WRITE_SCHEDULE);
  }

  async acquire(name: string, owner: string): Promise<number> {
    return integerReply(
      'acquire',
      await this.#acquire(2, this.#lease(name), this.#fleet, owner, this.leaseMs, name),
    );
  }

  async renew(name: string, owner: string): Promise<boolean> {
    return integerReply('renew', await this.#renew(1, this.#lease(name), owner, this.leaseMs), 1) === 1;
  }

  async release(name: string, owner: string): Promise<boolean> {
    return integerReply('release', await this.#release(1, this.#lease(name), owner), 1) === 1;
  }

  async readSchedule(name: string): Promise<PeriodicFleetSchedule | null> {
    const reply = await this.#readSchedule(1, this.#fleet, name);
    const [last, next, grid] = Array.isArray(reply) ? (reply as unknown[]) : [];
    // Lua turns the nil of a missing field into false; a client may give null.
    if (grid === null || grid === false) return null;
    if (typeof grid !== 'string') throw new Error(`Redis answered ${describeValue(reply)} to readSchedule`);
    return { grid, last: integerReply('readSchedule', last), next: integerReply('readSchedule', next) };
  }

  async writeSchedule(
    name: string,
    owner: string,
    fencingToken: number,
    { grid, last, next }: PeriodicFleetSchedule,
  ): Promise<boolean> {
    const args = [owner, fencingToken, name, last, next, grid];
    return (
      integerReply(
        'writeSchedule',
        await this.#writeSchedule(2, this.#lease(name), this.#fleet, ...args),
        1,
      ) === 1
    );
  }

  /**
   * The heartbeat in scripts of at most STEP renewals and STEP leases to take each, sent together: a script
   * of tens of thousands of jobs would hold Redis up, and its arguments would not fit on Node's stack.
   */
  async heartbeat({ member, renew, acquire }: PeriodicHeartbeat): Promise<PeriodicHeartbeatReply> {
    const steps = Math.max(1, Math.ceil(renew.length / STEP), Math.ceil(acquire.length / STEP));
    const replies = await Promise.all(
      Array.from({ length: steps }, (_, i) =>
        this.#heartbeatStep({
          member,
          renew: renew.slice(i * STEP, (i + 1) * STEP),
          acquire: acquire.slice(i * STEP, (i + 1) * STEP),
        }),
      ),
    ).catch((error: unknown) => {
      // The replica counts its leases lost: their runs are recorded in their lists from now on.
      this.#forget(member.owner);
      throw error;
    });
    const reply: PeriodicHeartbeatReply = {
      members: replies.at(-1)!.members,
      paused: replies.at(-1)!.paused,
      triggers: replies.flatMap((step) => step.triggers ?? []),
      renewed: replies.flatMap((step) => step.renewed),
      acquired: replies.flatMap((step) => step.acquired),
      ...(replies.at(-1)!.fleet === undefined ? {} : { fleet: replies.at(-1)!.fleet }),
    };
    this.#held(member.owner, renew, acquire, reply, new Set(replies.map((step) => step.epoch)));
    return reply;
  }

  /**
   * What an owner's heartbeat tells of the leases it holds: those it renewed and took are its holdings, and none
   * other; the epoch it read lets their writes go unchecked (WRITE_HELD), unless its steps read different ones (a
   * lease changed hands between them).
   */
  #held(
    owner: string,
    renew: PeriodicLeaseHeld[],
    acquire: string[],
    { renewed, acquired }: PeriodicHeartbeatReply,
    epochs: Set<string>,
  ): void {
    const kept = new Set(renew.filter((_, i) => renewed[i]).map(({ name }) => name));
    for (const [name, holding] of this.#holdings) {
      if (holding.owner === owner && !kept.has(name)) this.#holdings.delete(name);
    }
    acquired.forEach((taken, i) => {
      if (taken === null) return;
      const { fencingToken, schedule } = taken;
      const name = acquire[i];
      this.#holdings.set(name, { owner, fencingToken, last: schedule?.last ?? 0, tail: new RunTail(name) });
    });
    const [epoch] = epochs;
    if (epochs.size === 1 && epoch !== '') this.#epochs.set(owner, epoch);
    else this.#epochs.delete(owner);
  }

  /** Forgets what an owner holds: its writes are checked, and its runs recorded in their lists. */
  #forget(owner: string): void {
    this.#epochs.delete(owner);
    for (const [name, holding] of this.#holdings) if (holding.owner === owner) this.#holdings.delete(name);
  }

  async #heartbeatStep({
    member,
    renew,
    acquire,
  }: PeriodicHeartbeat): Promise<PeriodicHeartbeatReply & { epoch: string }> {
    const keys = [
      this.#fleet,
      ...renew.map(({ name }) => this.#lease(name)),
      ...acquire.map((name) => this.#lease(name)),
    ];
    const { owner, replica, jobs } = member;
    // Leases this owner's latest heartbeat renewed or took, and no other: renewed unchecked while the epoch holds.
    const known = this.#epochs.get(owner);
    const held = renew.every(({ name, fencingToken }) => {
      const holding = this.#holdings.get(name);
      return holding?.owner === owner && holding.fencingToken === fencingToken;
    });
    let reply =
      known !== undefined && held && acquire.length === 0
        ? await this.#renewHeld(keys.length, ...keys, owner, replica, jobs, this.leaseMs, known)
        : 0;
    if (reply === 0 || reply === '0') {
      const tokens = renew.map(({ fencingToken }) => fencingToken);
      const names = renew.map(({ name }) => name);
      const args = [owner, replica, jobs, this.leaseMs, renew.length, ...tokens, ...names, ...acquire];
      reply = await this.#heartbeat(keys.length, ...keys, ...args);
    }
    const [members, renewed, acquired, paused, triggers, epoch, fleet] = Array.isArray(reply)
      ? (reply as unknown[])
      : [];
    if (!Array.isArray(members) || !Array.isArray(renewed) || !Array.isArray(acquired)) {
      throw new Error(`Redis answered ${describeValue(reply)} to a heartbeat`);
    }
    return {
      paused: typeof paused === 'string' ? (JSON.parse(paused) as string[]) : [],
      triggers: typeof triggers === 'string' && triggers !== '' ? triggers.split('\n').map(triggerOf) : [],
      members: pairs(members).map(([owner, record]) => {
        const [replica, jobs] = String(record).split('\t');
        return { owner: String(owner), replica, jobs: jobs ?? '' } satisfies PeriodicFleetMember;
      }),
      renewed: renewed.map((ok) => integerReply('heartbeat', ok, 1) === 1),
      acquired: acquire.map((_, i) => {
        const [token, last, next, grid] = acquired.slice(i * 4, i * 4 + 4);
        const fencingToken = integerReply('heartbeat', token);
        if (fencingToken === 0) return null;
        const schedule =
          grid === '' || grid === undefined
            ? null
            : {
                grid: String(grid),
                last: integerReply('heartbeat', last),
                next: integerReply('heartbeat', next),
              };
        return { fencingToken, schedule };
      }),
      epoch: typeof epoch === 'string' || typeof epoch === 'number' ? String(epoch) : '',
      ...(typeof fleet === 'string' && fleet !== '' ? { fleet } : {}),
    };
  }

  async writeSchedules(owner: string, writes: PeriodicScheduleWrite[]): Promise<PeriodicScheduleWritten[]> {
    // The records of this turn go with the first step.
    const steps = inSteps(writes).map((step, i) =>
      this.#send(owner, step, i === 0 ? this.#takeRecords() : undefined),
    );
    return (await Promise.all(steps)).flat();
  }

  /**
   * Sends `owner`'s writes of schedules, and the records of runs: those of jobs held go to their tails (RunTail)
   * as plain commands, the others to their lists with the writes (RECORD). Resolves the writes' answers, and
   * whoever waits for the records once their commands have been answered: a tail that fails fails no claim, and
   * claims that fail fail only the records that went with them.
   */
  #send(
    owner: string | undefined,
    writes: PeriodicScheduleWrite[],
    records: Records | undefined,
  ): Promise<PeriodicScheduleWritten[]> {
    // The first script of records for the lists goes with the writes, the others on their own.
    const [lists, ...more] = records?.lists.filter((batch) => !batch.empty) ?? [];
    const answers =
      owner !== undefined
        ? this.#writeHeldStep(owner, writes, lists)
        : lists !== undefined
          ? this.#writeSchedulesStep('', [], lists)
          : Promise.resolve([]);
    if (records !== undefined) {
      const sent = [
        ...(lists === undefined ? [] : [answers]),
        ...more.map((batch) => this.#writeSchedulesStep('', [], batch)),
        ...this.#sendTails(records.tails),
      ];
      Promise.all(sent).then(
        () => records.waiting.forEach(({ resolve }) => resolve()),
        (error: unknown) => records.waiting.forEach(({ reject }) => reject(error)),
      );
    }
    return answers;
  }

  /** The fields of the histories of the jobs held that have new records (RunTail), an HSET per owner and STEP jobs. */
  #sendTails(tails: Map<Holding, PeriodicRunEntry[]>): Promise<unknown>[] {
    const commands = new Map<string, { jobs: number; pairs: string[] }[]>();
    for (const [{ owner, tail }, runs] of tails) {
      for (const run of runs) tail.add(run);
      const ofOwner = commands.get(owner) ?? [];
      if (ofOwner.length === 0 || ofOwner.at(-1)!.jobs === STEP) ofOwner.push({ jobs: 0, pairs: [] });
      const command = ofOwner.at(-1)!;
      command.jobs++;
      command.pairs.push(...tail.fields(this.#keep));
      commands.set(owner, ofOwner);
    }
    return [...commands].flatMap(([owner, ofOwner]) =>
      ofOwner.map(({ pairs }) => this.#client.call!('HSET', this.#tails(owner), ...pairs)),
    );
  }

  /**
   * One owner's writes: unchecked (WRITE_HELD) while its epoch holds, for the writes of leases its latest heartbeat
   * renewed or took with that token, whose last slot does not go back from the one this coordinator wrote;
   * checked, one by one, for the others, and for all when the epoch has moved on (then until the owner's next
   * heartbeat). Records for the lists go with the checked writes.
   */
  async #writeHeldStep(
    owner: string,
    writes: PeriodicScheduleWrite[],
    lists: RecordBatch | undefined,
  ): Promise<PeriodicScheduleWritten[]> {
    const epoch = this.#epochs.get(owner);
    if (epoch === undefined) return this.#writeSchedulesStep(owner, writes, lists);
    const held: number[] = [];
    const checked: number[] = [];
    writes.forEach(({ name, fencingToken, schedule }, i) => {
      const holding = this.#holdings.get(name);
      const ok =
        holding?.owner === owner && holding.fencingToken === fencingToken && schedule.last >= holding.last;
      if (ok) holding.last = schedule.last;
      (ok ? held : checked).push(i);
    });
    const answers: PeriodicScheduleWritten[] = [];
    const answer = (indices: number[]) => (written: PeriodicScheduleWritten[]) =>
      indices.forEach((index, i) => (answers[index] = written[i]));
    const pick = (indices: number[]) => indices.map((i) => writes[i]);
    const [unchecked] = await Promise.all([
      this.#writeUnchecked(owner, epoch, pick(held)),
      checked.length === 0 && lists === undefined
        ? undefined
        : this.#writeSchedulesStep(owner, pick(checked), lists).then(answer(checked)),
    ]);
    answer(held)(unchecked ?? (await this.#writeSchedulesStep(owner, pick(held), undefined)));
    return answers;
  }

  /** Writes, unchecked (WRITE_HELD); undefined, having written nothing, when the epoch has moved on. */
  async #writeUnchecked(
    owner: string,
    epoch: string,
    writes: PeriodicScheduleWrite[],
  ): Promise<PeriodicScheduleWritten[] | undefined> {
    if (writes.length === 0) return [];
    const fields: string[] = [];
    for (const { name, fencingToken, schedule } of writes) {
      fields.push(`schedule:${name}`, `${fencingToken} ${schedule.last} ${schedule.next}`);
    }
    for (const { name, fencingToken, schedule } of writes) {
      if (this.#gridChanged(name, fencingToken, schedule.grid)) fields.push(`grid:${name}`, schedule.grid);
    }
    const reply = await this.#writeHeld(1, this.#fleet, owner, epoch, writes.length, ...fields);
    if (Array.isArray(reply) && reply.length === writes.length) {
      return reply.map((ok, i): PeriodicScheduleWritten => {
        const { name, fencingToken, schedule } = writes[i];
        this.#grids.set(name, { fencingToken, grid: schedule.grid });
        return integerReply('writeSchedules', ok, 2) === 2 ? 'paused' : true;
      });
    }
    integerReply('writeSchedules', reply, 0);
    if (this.#epochs.get(owner) === epoch) this.#epochs.delete(owner);
    return undefined;
  }

  /** Whether a write must send the job's grid: not under a token whose grid it wrote already. */
  #gridChanged(name: string, fencingToken: number, grid: string): boolean {
    const known = this.#grids.get(name);
    return known?.fencingToken !== fencingToken || known.grid !== grid;
  }

  /** Writes checked one by one, with records for the lists (WRITE_SCHEDULES). */
  async #writeSchedulesStep(
    owner: string,
    writes: PeriodicScheduleWrite[],
    lists: RecordBatch | undefined,
  ): Promise<PeriodicScheduleWritten[]> {
    const fields: string[] = [];
    const values: string[] = [];
    const tokens: number[] = [];
    const lasts: number[] = [];
    const grids: (string | number)[] = [];
    for (const [i, { name, fencingToken, schedule }] of writes.entries()) {
      fields.push(`schedule:${name}`);
      values.push(`${fencingToken} ${schedule.last} ${schedule.next}`);
      tokens.push(fencingToken);
      lasts.push(schedule.last);
      if (this.#gridChanged(name, fencingToken, schedule.grid))
        grids.push(i + 1, `grid:${name}`, schedule.grid);
    }
    const keys = [this.#fleet, ...(lists?.keys() ?? [])];
    const reply = await this.#writeSchedules(
      keys.length,
      ...keys,
      owner,
      writes.length,
      lists === undefined ? 1 : this.#keep,
      ...fields,
      ...values,
      ...tokens,
      ...lasts,
      grids.length / 3,
      ...grids,
      ...(lists?.args() ?? [0, 0, 0, 0]),
    );
    if (!Array.isArray(reply) || reply.length !== writes.length) {
      throw new Error(`Redis answered ${describeValue(reply)} to writeSchedules`);
    }
    return reply.map((ok, i): PeriodicScheduleWritten => {
      const written = integerReply('writeSchedules', ok, 2);
      const { name, fencingToken, schedule } = writes[i];
      if (written !== 0) this.#grids.set(name, { fencingToken, grid: schedule.grid });
      return written === 2 ? 'paused' : written === 1;
    });
  }

  /**
   * Records runs with the writes of schedules of this turn, or on their own at its end. The runs of a job whose
   * lease one of this coordinator's owners holds go to the tail of its history (RunTail), where a run recorded at
   * its start is replaced by its end; the others, and all of them for a client without `call`, to the job's list
   * `<keyPrefix>\nr<name>`, where a run recorded at its start is replaced by its end's record.
   */
  recordRuns(runs: PeriodicRunEntry[], keep: number): Promise<void> {
    return new Promise((resolve, reject) => {
      if (this.#records === undefined) {
        this.#records = new Records();
        queueMicrotask(() => {
          const records = this.#takeRecords();
          if (records !== undefined) this.#send(undefined, [], records).catch(() => undefined);
        });
      }
      const batch = this.#records;
      this.#keep = keep;
      batch.waiting.push({ resolve, reject });
      for (const run of runs) {
        const holding = this.#holdings.get(run.name);
        if (holding?.fencingToken === run.fencingToken && this.#client.call !== undefined) {
          const held = batch.tails.get(holding) ?? [];
          held.push(run);
          batch.tails.set(holding, held);
          continue;
        }
        const [mark, record] = listRecord(run);
        const replaces = run.reason !== null && this.#open.delete(run.id);
        if (run.reason === null) {
          this.#open.add(run.id);
          if (this.#open.size > OPEN_KEPT) this.#open.delete(this.#open.values().next().value!);
        }
        batch.list().add(run, this.#runs(run.name), record, replaces ? mark.length : undefined);
      }
    });
  }

  #takeRecords(): Records | undefined {
    const records = this.#records;
    this.#records = undefined;
    return records;
  }

  async readHistory(
    name: string,
    limit: number,
    before: number | null,
    keep = this.#keep,
  ): Promise<PeriodicRunEntry[]> {
    const reply = await this.#readHistory(2, this.#fleet, this.#runs(name), name, keep);
    const [tail, segments, list] = Array.isArray(reply) ? (reply as unknown[]) : [];
    if (typeof tail !== 'string' || !Array.isArray(segments) || !Array.isArray(list)) {
      throw new Error(`Redis answered ${describeValue(reply)} to a read of the history`);
    }
    const runs = [tail, ...segments, ...list].flatMap((value) => historyOf(String(value), name).runs);
    return newestFirst(newestFirst(latest(runs), keep, null), limit, before);
  }

  /** In scripts of at most STEP / 4 jobs each, sent together. */
  async readFleet(names: string[]): Promise<PeriodicFleetRead[]> {
    const steps: string[][] = [];
    for (let i = 0; i < names.length; i += STEP / 4) steps.push(names.slice(i, i + STEP / 4));
    const replies = await Promise.all(steps.map((step) => this.#readFleetStep(step)));
    return replies.flat();
  }

  async #readFleetStep(names: string[]): Promise<PeriodicFleetRead[]> {
    const keys = [this.#fleet, ...names.flatMap((name) => [this.#lease(name), this.#runs(name)])];
    const reply = await this.#readFleet(keys.length, ...keys, ...names);
    if (!Array.isArray(reply) || reply.length !== 1 + names.length * 12) {
      throw new Error(`Redis answered ${describeValue(reply)} to readFleet`);
    }
    const clock = integerReply('readFleet', reply[0]);
    return names.map((name, i) => {
      const [owner, ttl, token, last, next, grid, pause, ok, failed, newest, tailValue, segment] = reply
        .slice(1 + i * 12, 13 + i * 12)
        .map((value: unknown) => (typeof value === 'number' || Array.isArray(value) ? value : String(value)));
      const text = (value: unknown) => String(value);
      const held = owner !== '' && Number(ttl) > 0 && token !== '';
      const tail = historyOf(text(tailValue), name);
      // The list's two newest elements: the end of a run can come before the start that a hand-over moved there.
      const elements = Array.isArray(newest) ? (newest as unknown[]) : [];
      const runs = [...elements, segment].flatMap((value) => historyOf(text(value), name).runs);
      const [lastRun = null] = newestFirst(latest([...runs, ...tail.runs]), 1, null);
      // The last success: the tail's holding's, or the one before it that `ok` tells; with the failures since.
      const listOk = ok === '' ? 0 : integerReply('readFleet', ok);
      const succeeded = Math.max(tail.okAt, listOk);
      const [count, since = ''] = text(failed).split(' ');
      const listFailing =
        failed !== '' && since === (succeeded === 0 ? '' : String(succeeded)) && lastRun?.reason !== 'normal';
      return {
        name,
        holder: held
          ? {
              owner: text(owner),
              fencingToken: integerReply('readFleet', token),
              until: clock + integerReply('readFleet', ttl),
            }
          : null,
        pause: pause === '' ? null : operationOf(text(pause)),
        schedule:
          grid === ''
            ? null
            : {
                grid: text(grid),
                last: integerReply('readFleet', last),
                next: integerReply('readFleet', next),
              },
        lastRun,
        lastSucceededAt: succeeded === 0 ? null : succeeded,
        consecutiveFailures:
          // A holding without a success failed after the success before it.
          (tail.okAt === 0 || tail.okAt === succeeded ? tail.failures : 0) +
          (listFailing ? integerReply('readFleet', count) : 0),
      };
    });
  }

  async requestTrigger(request: PeriodicTriggerRequest): Promise<void> {
    const { id, ...rest } = request;
    const json = `{"id":${JSON.stringify(id)},${JSON.stringify({ v: RECORD_VERSION, ...rest }).slice(1)}`;
    await this.#requestTrigger(1, this.#fleet, request.name, json);
  }

  async readTrigger(name: string, id: string, withdraw: boolean): Promise<PeriodicTriggerState> {
    const mark = `{"id":${JSON.stringify(id)}`;
    const reply = await this.#readTrigger(1, this.#fleet, name, id, mark, withdraw ? 1 : 0);
    const [state, answer] = Array.isArray(reply) ? (reply as unknown[]) : [];
    if (state === 'answer' && typeof answer === 'string') return triggerAnswerOf(answer);
    if (state === 'pending' || state === 'taken' || state === 'withdrawn') return state;
    throw new Error(`Redis answered ${describeValue(reply)} to readTrigger`);
  }

  async answerTrigger(_name: string, id: string, answer: PeriodicTriggerAnswer): Promise<void> {
    await this.#setField(1, this.#fleet, `answer:${id}`, JSON.stringify({ v: RECORD_VERSION, ...answer }));
  }

  async operate(name: string, operation: PeriodicOperation, keep: number): Promise<void> {
    const record = JSON.stringify({ v: RECORD_VERSION, ...operation });
    await this.#operate(1, this.#fleet, name, operation.action, record, keep);
  }

  async readPause(name: string): Promise<PeriodicOperation | null> {
    const [record] = await this.#hmget(`pause:${name}`);
    return typeof record === 'string' ? operationOf(record) : null;
  }

  async readAudit(name: string, limit: number): Promise<PeriodicOperation[]> {
    const [trail] = await this.#hmget(`audit:${name}`);
    if (typeof trail !== 'string') return [];
    return trail
      .split('\n')
      .filter((line) => line !== '')
      .slice(0, limit)
      .map(operationOf);
  }

  /** Fields of the hash, as READ_FIELDS reads them. */
  async #hmget(...fields: string[]): Promise<unknown[]> {
    const reply = await this.#readFields(1, this.#fleet, ...fields);
    if (!Array.isArray(reply)) throw new Error(`Redis answered ${describeValue(reply)} to HMGET`);
    return reply;
  }

  async releaseAll(owner: string, leases: PeriodicLeaseHeld[], leave: boolean): Promise<void> {
    // The member leaves with the last step, once its leases are free. The runs of a job given up that are
    // recorded from now on (a run that ended after its lease was lost) go to the job's list.
    for (const { name } of leases) {
      this.#grids.delete(name);
      if (this.#holdings.get(name)?.owner === owner) this.#holdings.delete(name);
    }
    if (leave) this.#forget(owner);
    const steps = inSteps(leases);
    for (const [i, step] of steps.entries()) {
      const keys = [this.#fleet, ...step.map(({ name }) => this.#lease(name))];
      const args = step.flatMap(({ name, fencingToken }) => [name, fencingToken]);
      const last = i === steps.length - 1;
      await this.#releaseAll(keys.length, ...keys, owner, leave && last ? 1 : 0, ...args);
    }
  }

  /** The key of the tails of the histories of the jobs `owner` holds, a hash (RunTail). */
  #tails(owner: string): string {
    return keyOf(this.keyPrefix, 'tails', owner);
  }

  /** The key of the history of job `name`, a list. */
  #runs(name: string): string {
    return keyOf(this.keyPrefix, 'runs', name);
  }

  /** The key of the lease of job `name`. */
  #lease(name: string): string {
    return keyOf(this.keyPrefix, 'lease', name);
  }

  /**
   * A script run by its SHA1 (`EVALSHA`), sent whole (`EVAL`) when Redis does not have it yet; its first argument
   * is the number of keys.
   */
  #script(source: string): (keys: number, ...args: (string | number)[]) => Promise<unknown> {
    const sha1 = createHash('sha1').update(source).digest('hex');
    return async (keys, ...args) => {
      try {
        return await this.#client.evalsha(sha1, keys, ...args);
      } catch (error) {
        if (!isError(error) || !error.message.startsWith('NOSCRIPT')) throw error;
        return await this.#client.eval(source, keys, ...args);
      }
    };
  }
}

/** A lease one of the coordinator's owners holds, as its heartbeat renewed or took it, and its job's tail. */
interface Holding {
  owner: string;
  fencingToken: number;
  /** The last slot of the job's schedule, as the lease was taken with it or this coordinator last wrote it. */
  last: number;
  tail: RunTail;
}

/** Records of runs to send, and those waiting for their answer. */
class Records {
  readonly waiting: { resolve: () => void; reject: (error: unknown) => void }[] = [];
  /** The runs of jobs held, for their tails, in the order they were recorded. */
  readonly tails = new Map<Holding, PeriodicRunEntry[]>();
  /** The others, for the lists: a script for each STEP records, in order. */
  readonly lists = [new RecordBatch()];

  /** The batch that takes the next record for a list. */
  list(): RecordBatch {
    if (this.lists.at(-1)!.size >= STEP) this.lists.push(new RecordBatch());
    return this.lists.at(-1)!;
  }
}

/** Records of runs to send to their lists in one script, in RECORD's sections. */
class RecordBatch {
  /** The lists of the records that replace a start, then those of the new records: the script's KEYS. */
  readonly #lists: { replacing: string[]; fresh: string[] } = { replacing: [], fresh: [] };
  /** Per record that replaces a start, the record and how long its mark is; and the new records. */
  readonly #records: { replacing: (string | number)[]; fresh: string[] } = { replacing: [], fresh: [] };
  /** The runs that started in this batch: where their start is among the new records. */
  readonly #started = new Map<string, number>();
  /** Per job whose runs ended: when the last success ended (null if none did), and the failures since. */
  readonly #outcomes = new Map<string, { ok: number | null; failures: number }>();

  /**
   * The record of `run` for its job's `list`; `mark`, how long its start is, when it replaces the run's start:
   * a start in this batch is replaced here, before it is sent.
   */
  add(run: PeriodicRunEntry, list: string, record: string, mark: number | undefined): void {
    const started = this.#started.get(run.id);
    if (mark !== undefined && started !== undefined) this.#records.fresh[started] = record;
    else if (mark !== undefined) {
      this.#lists.replacing.push(list);
      this.#records.replacing.push(record, mark);
    } else {
      if (run.reason === null) this.#started.set(run.id, this.#records.fresh.length);
      this.#lists.fresh.push(list);
      this.#records.fresh.push(record);
    }
    const outcome = outcomeOf(run);
    if (outcome === 'ok') this.#outcomes.set(run.name, { ok: run.finishedAt ?? 0, failures: 0 });
    else if (outcome === 'fail') {
      const { ok = null, failures = 0 } = this.#outcomes.get(run.name) ?? {};
      this.#outcomes.set(run.name, { ok, failures: failures + 1 });
    }
  }

  get empty(): boolean {
    return this.#outcomes.size === 0 && this.size === 0;
  }

  /** How many records it holds. */
  get size(): number {
    return this.#lists.replacing.length + this.#lists.fresh.length;
  }

  keys(): string[] {
    return [...this.#lists.replacing, ...this.#lists.fresh];
  }

  args(): (string | number)[] {
    const failing: (string | number)[] = [];
    const succeeded: (string | number)[] = [];
    for (const [name, { ok, failures }] of this.#outcomes) {
      if (failures > 0) failing.push(name, failures, ok ?? '');
      if (ok !== null) succeeded.push(`ok:${name}`, ok);
    }
    const { replacing, fresh } = this.#records;
    const counts = [replacing.length / 2, fresh.length, failing.length / 3, succeeded.length / 2];
    return [...counts, ...replacing, ...fresh, ...failing, ...succeeded];
  }
}

/** How many jobs one script of a batched step handles at most. */
const STEP = 2000;

/** `items` in steps of at most STEP; one empty step for none. */
function inSteps<T>(items: T[]): T[][] {
  const steps: T[][] = [];
  for (let i = 0; i < items.length; i += STEP) steps.push(items.slice(i, i + STEP));
  return steps.length === 0 ? [[]] : steps;
}

/**
 * A run's record in its job's history list, and its mark (the start that names the run): a JSON array of the
 * fields of RUN_FIELDS after RUN_ARRAY_VERSION (about half the bytes of an object, and so of the list's memory
 * and of Redis's work per run); the job's name is the list's.
 */
function listRecord(run: PeriodicRunEntry): [mark: string, record: string] {
  const mark = `[${RUN_ARRAY_VERSION},${JSON.stringify(run.id)}`;
  const fields = JSON.stringify(RUN_FIELDS.slice(1, -1).map((field) => run[field])).slice(1, -1);
  const { error } = run;
  return [
    mark,
    `${mark},${fields}${error === null ? '' : `,${JSON.stringify([error.name, error.message])}`}]`,
  ];
}

/** Each run once, by id: its end where both its start and its end were read (from its tail and its list). */
function latest(runs: PeriodicRunEntry[]): PeriodicRunEntry[] {
  const byId = new Map<string, PeriodicRunEntry>();
  for (const run of runs) {
    const known = byId.get(run.id);
    if (known === undefined || (known.reason === null && run.reason !== null)) byId.set(run.id, run);
  }
  return [...byId.values()];
}

/** A flat list of pairs, as Redis answers a hash: [[key, value], …]. */
function pairs(flat: unknown[]): [unknown, unknown][] {
  const result: [unknown, unknown][] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) result.push([flat[i], flat[i + 1]]);
  return result;
}
