-- KEYS: the hash; ARGV: field, value. Sets the field.

return redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
