-- KEYS: the hash; ARGV: job name, trigger id, the start of its JSON (`{"id":…`), withdraw (1 or 0). The answer
-- (`answer:<id>`, deleted as it is read), or `pending` while the trigger is still left for the holder (with
-- withdraw, it is taken away: `withdrawn`), or `taken`.

local answer = redis.call('HGET', KEYS[1], 'answer:' .. ARGV[2])
if answer then
  redis.call('HDEL', KEYS[1], 'answer:' .. ARGV[2])
  return {'answer', answer}
end
local field, mark = 'trigger:' .. ARGV[1], ARGV[3]
local kept, found = {}, false
for line in string.gmatch(redis.call('HGET', KEYS[1], field) or '', '[^\n]+') do
  if string.sub(line, 1, #mark) == mark then found = true else kept[#kept + 1] = line end
end
if not found then return {'taken'} end
if ARGV[4] ~= '1' then return {'pending'} end
if #kept > 0 then
  redis.call('HSET', KEYS[1], field, table.concat(kept, '\n'))
  return {'withdrawn'}
end
redis.call('HDEL', KEYS[1], field)
local names = {}
for _, other in ipairs(cjson.decode(redis.call('HGET', KEYS[1], 'triggers') or '[]')) do
  if other ~= ARGV[1] then names[#names + 1] = other end
end
if #names == 0 then redis.call('HDEL', KEYS[1], 'triggers')
else redis.call('HSET', KEYS[1], 'triggers', cjson.encode(names)) end
return {'withdrawn'}
