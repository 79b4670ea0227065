-- ARGV[11] is the publish command: PUBLISH, or SPUBLISH on Cluster (the
-- channel then is the shard's, in its slot).
-- apply (fenced): KEYS task, due, counts, exp; ARGV id, owner, epoch, now,
-- d, st, due, event, channel, expiry.
local f = redis.call('HMGET', KEYS[1], 'st', 'own', 'ep', 'exp')
if not f[1] or terminal(f[1]) or f[2] ~= ARGV[2] or f[3] ~= ARGV[3] or tonumber(f[4]) < tonumber(ARGV[4]) then return 0 end
redis.call('HSET', KEYS[1], 'd', ARGV[5], 'st', ARGV[6])
redis.call('HDEL', KEYS[1], 'own', 'exp')
if f[1] ~= ARGV[6] then
  redis.call('HINCRBY', KEYS[3], f[1], -1)
  redis.call('HINCRBY', KEYS[3], ARGV[6], 1)
end
if tonumber(ARGV[7]) >= 0 then redis.call('ZADD', KEYS[2], ARGV[7], ARGV[1]) else redis.call('ZREM', KEYS[2], ARGV[1]) end
if tonumber(ARGV[10]) >= 0 then redis.call('ZADD', KEYS[4], ARGV[10], ARGV[1]) end
if ARGV[8] ~= '' then redis.call(ARGV[11], ARGV[9], ARGV[8]) end
return 1
