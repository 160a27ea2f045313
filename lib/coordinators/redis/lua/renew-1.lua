-- KEYS: lease key; ARGV: owner, leaseMs. Extends the lease if the owner holds it still: 1, else 0.

if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
