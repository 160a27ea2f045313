-- A stored schedule's record, the value of its name in the hash of stored schedules: its version, createdAt,
-- updatedAt, change, handler, who changed it last (JSON: null or a string) and definition (JSON), separated by
-- tabs; none of the first six has one, and JSON writes a tab in a string as \t. storedFields(record) splits it.

local function storedFields(record)
  local fields, from = {}, 1
  for _ = 1, 6 do
    local tab = string.find(record, '\t', from, true)
    fields[#fields + 1] = string.sub(record, from, tab - 1)
    from = tab + 1
  end
  fields[7] = string.sub(record, from)
  return fields
end
