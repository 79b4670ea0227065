-- ARGV[9] is the publish command: PUBLISH, or SPUBLISH on Cluster (the
-- channel then is the shard's, in its slot).
-- update (compare-and-set on the record): KEYS task, due, counts, exp;
-- ARGV id, old d, new d, new st, due, event, channel, expiry. Supersedes
-- the lease.
local cur = redis.call('HMGET', KEYS[1], 'd', 'st')
if not cur[1] then return 'missing' end
if terminal(cur[2]) then return 'terminal' end
if cur[1] ~= ARGV[2] then return 'conflict' end
redis.call('HSET', KEYS[1], 'd', ARGV[3], 'st', ARGV[4])
redis.call('HINCRBY', KEYS[1], 'ep', 1)
redis.call('HDEL', KEYS[1], 'own', 'exp')
if cur[2] ~= ARGV[4] then
  redis.call('HINCRBY', KEYS[3], cur[2], -1)
  redis.call('HINCRBY', KEYS[3], ARGV[4], 1)
end
if tonumber(ARGV[5]) >= 0 then redis.call('ZADD', KEYS[2], ARGV[5], ARGV[1]) else redis.call('ZREM', KEYS[2], ARGV[1]) end
if tonumber(ARGV[8]) >= 0 then redis.call('ZADD', KEYS[4], ARGV[8], ARGV[1]) end
if ARGV[6] ~= '' then redis.call(ARGV[9], ARGV[7], ARGV[6]) end
return 'ok'
