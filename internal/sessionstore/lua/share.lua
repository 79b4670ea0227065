-- Takes a place in a caller's share of the sessions: drops expired members
-- of the caller's set, then adds the session unless the share is full.
-- The set lives at least as long as its newest member.
-- KEYS[1] the caller's sessions
-- ARGV[1] now (ms), ARGV[2] ttl (ms), ARGV[3] the share (0: none),
-- ARGV[4] the session id
-- Returns 0 (taken) or 2 (the share is full).
local now, ttl = tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local share = tonumber(ARGV[3])
if share > 0 and redis.call('ZCARD', KEYS[1]) >= share then return 2 end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[4])
if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
return 0
