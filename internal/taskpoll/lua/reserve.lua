-- reserve (the per-user cap): KEYS act; ARGV id, created, limit. Returns 1
-- when it added id, 2 when id was there already, 0 when the user is at the
-- limit.
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 2 end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
return 1
