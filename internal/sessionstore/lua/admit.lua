-- Admits a new session within the caps: drops expired members, then adds
-- the session to the set of all sessions and its caller's set unless one
-- of them is full. A set lives at least as long as its newest member
-- (its TTL is only ever raised, here and when members are touched).
-- KEYS[1] all sessions, KEYS[2] the caller's
-- ARGV[1] now (ms), ARGV[2] ttl (ms), ARGV[3] cap (0: none),
-- ARGV[4] caller's share (0: none), ARGV[5] session id
-- Returns 0 (admitted), 1 (cap full) or 2 (share full).
local now, ttl = tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local limit, share = tonumber(ARGV[3]), tonumber(ARGV[4])
if limit > 0 and redis.call('ZCARD', KEYS[1]) >= limit then return 1 end
if share > 0 and redis.call('ZCARD', KEYS[2]) >= share then return 2 end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[5])
redis.call('ZADD', KEYS[2], now + ttl, ARGV[5])
for i = 1, 2 do
  if redis.call('PTTL', KEYS[i]) < ttl then redis.call('PEXPIRE', KEYS[i], ttl) end
end
return 0
