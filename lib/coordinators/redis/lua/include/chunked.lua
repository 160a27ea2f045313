-- chunked(command, key, items, first, last) calls the command with the key (none if nil) and items `first` to
-- `last` (all of them by default), in steps of at most 960 items (Lua's unpack has a limit), and returns the
-- replies of the steps one after the other: a batch reads or writes the fields and keys of all its jobs in a few
-- calls, rather than a few per job. `items` may be ARGV itself, whose arguments then go to the command as they
-- came, with no table made of them.

local function chunked(command, key, items, first, last)
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
