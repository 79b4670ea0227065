-- Admits a new session within its group's part of the cap and writes its
-- record: drops expired members of the group's set, then adds the session
-- and writes its record and initialize params unless the group is full.
-- The set lives at least as long as its newest member (its TTL is only
-- ever raised, here and when members are touched).
-- KEYS[1] the group's sessions, KEYS[2] the record, KEYS[3] the
-- initialize params
-- ARGV[1] now (ms), ARGV[2] ttl (ms), ARGV[3] the group's cap (-1: none),
-- ARGV[4] the session id, ARGV[5] the initialize params ('' for none),
-- ARGV[6..] the record's field, value pairs
-- Returns 0 (admitted and written) or 1 (the group is full).
local now, ttl = tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local cap = tonumber(ARGV[3])
if cap >= 0 and redis.call('ZCARD', KEYS[1]) >= cap then return 1 end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[4])
if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
redis.call('HSET', KEYS[2], unpack(ARGV, 6))
redis.call('PEXPIRE', KEYS[2], ttl)
if ARGV[5] ~= '' then redis.call('SET', KEYS[3], ARGV[5], 'PX', ttl) end
return 0
