-- KEYS: the hash; ARGV: fields. Their values (false for a missing one).

return redis.call('HMGET', KEYS[1], unpack(ARGV))
