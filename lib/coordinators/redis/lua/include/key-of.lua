-- keyOf(fleet, kind, name) is the key of `kind` (a letter of KEY_KINDS, keys.ts) for `name`, as keys.ts's keyOf
-- makes it, for the scripts that find keys from names they read; `fleet` is the fleet's hash (KEYS[1], with the
-- client's own prefix if it has one). test/redis/keys.spec.ts checks that the two make the same keys.

local function keyOf(fleet, kind, name)
  local encoded = string.gsub(name, '[%%\n{}]', function(character)
    return string.format('%%%02X', string.byte(character))
  end)
  return string.sub(fleet, 1, -2) .. kind .. encoded
end
