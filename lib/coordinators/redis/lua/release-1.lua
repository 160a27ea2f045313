-- KEYS: lease key; ARGV: owner. Deletes the lease if the owner holds it still: 1, else 0.

if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
